// stat(2) with a deadline, off the event loop and off libuv's thread pool.
//
// A filesystem whose server stops answering (a FUSE daemon stopped with
// SIGSTOP, a dead NFS server) blocks every stat, open and lookup that reaches
// it until the server answers, possibly forever. Node's fs calls run on a pool
// of four threads: four such calls and every fs call of the daemon waits
// behind them, and a promise that never settles holds its operation (and its
// slot in the operation pool) forever. So whatever may touch a filesystem that
// is not podvol's own (a hostPath, a mount found below a volume) is looked at
// first by coreutils' `stat` in a child process with a deadline: a child stuck
// in the kernel is killed (a FUSE or NFS wait is killable) or, at worst,
// abandoned, and the caller gets `timed-out` within the deadline.
//
// A child stuck in the kernel may outlive even SIGKILL (a FUSE request the
// daemon had read before it stopped waits uninterruptibly), and every retry of
// the volume would leave one more such child behind. So a StatProbe runs at
// most one probe per path at a time: callers while it runs share its result,
// and after it timed out they get that result at once until the child is gone.
//
// While a caller waits on a probe, it need not hold a slot of the operation
// pool: the probe runs each wait through the `whileWaiting` it was given (the
// volume manager's OperationExecutor.whileWaiting, which lends the slot out).
import { type CommandRunner, createExecaRunner, createRunner } from './exec.ts';
import type { MountInfo } from './types.ts';

/** How long a filesystem may take to answer one stat before it counts as unresponsive. */
export const UNRESPONSIVE_AFTER_MS = 5_000;

export type DeadlineStat =
  | { state: 'ok'; type: FileType }
  | { state: 'error'; code: string; message: string }
  | { state: 'timed-out'; message: string };

export type FileType = 'Directory' | 'File' | 'Socket' | 'CharDevice' | 'BlockDevice' | 'Symlink' | 'Other';

// coreutils prints strerror(3) in the C locale; the few a caller branches on.
const ERRNO_BY_TEXT: Record<string, string> = {
  'No such file or directory': 'ENOENT',
  'Not a directory': 'ENOTDIR',
  'Permission denied': 'EACCES',
  'Transport endpoint is not connected': 'ENOTCONN',
  'Stale file handle': 'ESTALE',
  'Input/output error': 'EIO',
  'Too many levels of symbolic links': 'ELOOP',
  'File name too long': 'ENAMETOOLONG',
};

function typeOf(rawModeHex: string): FileType {
  switch (Number.parseInt(rawModeHex, 16) & 0o170000) {
    case 0o040000:
      return 'Directory';
    case 0o100000:
      return 'File';
    case 0o140000:
      return 'Socket';
    case 0o020000:
      return 'CharDevice';
    case 0o060000:
      return 'BlockDevice';
    case 0o120000:
      return 'Symlink';
    default:
      return 'Other';
  }
}

export interface DeadlineStatOptions {
  /** Follow a symlink at `path` (stat rather than lstat). */
  follow?: boolean;
  timeoutMs?: number;
  runner?: CommandRunner;
}

/**
 * stat (or lstat) of `path` in a child process: its file type, the errno it
 * failed with, or `timed-out` when the filesystem did not answer within the
 * deadline (the volume's reason is then FilesystemUnresponsive). Every call
 * starts a process: the daemon goes through a StatProbe instead.
 */
export async function statWithDeadline(path: string, opts: DeadlineStatOptions = {}): Promise<DeadlineStat> {
  return (await probeOnce(path, opts)).result;
}

async function probeOnce(
  path: string,
  opts: DeadlineStatOptions,
): Promise<{ result: DeadlineStat; exited?: Promise<void> }> {
  const timeoutMs = opts.timeoutMs ?? UNRESPONSIVE_AFTER_MS;
  const run = opts.runner ?? createExecaRunner();
  const res = await run({
    file: 'stat',
    args: [...(opts.follow ? ['-L'] : []), '--printf=%f', '--', path],
    timeoutMs,
  });
  const { exited } = res;
  if (res.timedOut)
    return {
      exited,
      result: {
        state: 'timed-out',
        message: `stat ${path}: no answer within ${timeoutMs} ms: the filesystem is not responding (a stopped FUSE daemon or an unreachable NFS server?)`,
      },
    };
  if (res.exitCode === 0 && /^[0-9a-f]+$/.test(res.output))
    return { exited, result: { state: 'ok', type: typeOf(res.output) } };
  if (res.spawnErrorCode)
    return {
      exited,
      result: { state: 'error', code: res.spawnErrorCode, message: `cannot run stat: ${res.spawnErrorCode}` },
    };
  const text = /: ([^:]+)$/.exec(res.output.trim())?.[1] ?? res.output.trim();
  return {
    exited,
    result: { state: 'error', code: ERRNO_BY_TEXT[text] ?? 'EUNKNOWN', message: `stat ${path}: ${text}` },
  };
}

/**
 * Runs a wait that may last until its deadline because a filesystem does not
 * answer; the operation pool gives the calling operation's slot to others
 * meanwhile (OperationExecutor.whileWaiting). The default just waits.
 */
export type WhileWaiting = <T>(wait: () => Promise<T>) => Promise<T>;

const justWait: WhileWaiting = (wait) => wait();

/**
 * The daemon's stat probes (one per daemon, handed out by the volume host): at
 * most one child per path and mode at a time. A caller arriving while a probe
 * runs gets that probe's result; once it timed out, callers get the timed-out
 * result at once for as long as its child lives (the filesystem still has not
 * answered it), and the next probe starts only after the child is gone.
 */
export class StatProbe {
  readonly #runner: CommandRunner;
  readonly #timeoutMs: number;
  /** Per path and mode: the probe's result, and whether it is in (its child may still live). */
  readonly #inFlight = new Map<string, { result: Promise<DeadlineStat>; answered: boolean }>();
  readonly #whileWaiting: WhileWaiting;

  constructor(opts: { runner?: CommandRunner; timeoutMs?: number; whileWaiting?: WhileWaiting } = {}) {
    this.#runner = opts.runner ?? createRunner();
    this.#timeoutMs = opts.timeoutMs ?? UNRESPONSIVE_AFTER_MS;
    this.#whileWaiting = opts.whileWaiting ?? justWait;
  }

  /**
   * Runs `wait` (on a filesystem that may not answer: its probe, a umount of
   * it with a deadline) the way this probe's own waits run: without the
   * caller's slot in the operation pool.
   */
  whileWaiting<T>(wait: () => Promise<T>): Promise<T> {
    return this.#whileWaiting(wait);
  }

  /** Probes whose child has not exited yet (at most one per path and mode). */
  inFlight(): number {
    return this.#inFlight.size;
  }

  stat(path: string, opts: { follow?: boolean } = {}): Promise<DeadlineStat> {
    const key = `${opts.follow ? 'L' : 'l'}${path}`;
    const running = this.#inFlight.get(key);
    // A timed-out result answers at once: nothing to wait on.
    if (running?.answered) return running.result;
    if (running) return this.#whileWaiting(() => running.result);
    const probe = probeOnce(path, { follow: opts.follow, timeoutMs: this.#timeoutMs, runner: this.#runner });
    const entry = { result: probe.then((p) => p.result), answered: false };
    this.#inFlight.set(key, entry);
    const forget = () => {
      if (this.#inFlight.get(key) === entry) this.#inFlight.delete(key);
    };
    void probe.then((p) => {
      entry.answered = true;
      return p.exited ? p.exited.then(forget) : forget();
    }, forget);
    return this.#whileWaiting(() => entry.result);
  }

  /** unresponsiveMounts through this probe. */
  unresponsiveMounts(
    mounts: readonly MountInfo[],
    path: string,
  ): Promise<{ mountPoint: string; message: string }[]> {
    return unresponsiveMountsWith(mounts, path, (mp) => this.stat(mp));
  }
}

/**
 * Filesystems served by a process or a remote server, the ones that hang when
 * it stops answering; local disk filesystems and tmpfs are not probed.
 */
const SERVED_FS = /^(fuse(\..*|blk|ctl)?|nfs4?|cifs|smb3|ceph|glusterfs|9p|afs|lustre|gpfs|beegfs|sshfs)$/;

/**
 * The mount points at or below `path` (from the mount table, which touches no
 * filesystem) whose filesystem does not answer a stat within the deadline,
 * deepest first. Only served filesystems (FUSE, NFS, CIFS, ...) are probed.
 */
export function unresponsiveMounts(
  mounts: readonly MountInfo[],
  path: string,
  opts: Omit<DeadlineStatOptions, 'follow'> = {},
): Promise<{ mountPoint: string; message: string }[]> {
  return unresponsiveMountsWith(mounts, path, (mp) => statWithDeadline(mp, opts));
}

async function unresponsiveMountsWith(
  mounts: readonly MountInfo[],
  path: string,
  stat: (mountPoint: string) => Promise<DeadlineStat>,
): Promise<{ mountPoint: string; message: string }[]> {
  const candidates = mounts
    .filter((m) => (m.mountPoint === path || m.mountPoint.startsWith(`${path}/`)) && SERVED_FS.test(m.fsType))
    .map((m) => m.mountPoint)
    .sort((a, b) => b.length - a.length);
  const out: { mountPoint: string; message: string }[] = [];
  for (const mountPoint of new Set(candidates)) {
    const st = await stat(mountPoint);
    if (st.state === 'timed-out') out.push({ mountPoint, message: st.message });
  }
  return out;
}
