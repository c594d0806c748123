// One read shared by callers that each need a read *begun after they asked*:
// concurrent teardowns each want the mount table as it is now (issue 15's
// hung-filesystem probe must see a FUSE mount made just before the teardown),
// and at 900 mounts a read and parse of /proc/self/mountinfo costs a few ms
// (more while other teardowns change it: consistentRead reads until two reads
// agree). A caller that finds no read running starts one; a caller that finds
// one running (it began before the caller asked, so it may miss what the
// caller must see) waits for the next read, which starts when the running one
// settles and is shared by every caller that asked in between.
// The real mounter's list() is itself read once per change of the table
// (src/mount/mount-table.ts): there this mostly resolves from its shared
// table; it still shares the reads where the table is not watched.
export interface FreshRead<T> {
  /** The result of a read that begins at or after this call. */
  read(): Promise<T>;
}

export function freshRead<T>(readNow: () => Promise<T>): FreshRead<T> {
  /** The read running now, if any. */
  let running: Promise<T> | undefined;
  /** The read that starts once `running` settles (not begun yet), shared by whoever asks until then. */
  let next: Promise<T> | undefined;
  const start = (): Promise<T> => {
    const p = readNow();
    running = p;
    const done = () => {
      if (running === p) running = undefined;
    };
    p.then(done, done);
    return p;
  };
  return {
    read() {
      // Not begun yet (it is cleared as it starts), so it begins after this call.
      if (next !== undefined) return next;
      if (running === undefined) return start();
      next = running
        .then(
          () => {},
          () => {},
        )
        .then(() => {
          next = undefined;
          return start();
        });
      return next;
    },
  };
}
