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
import { type CommandRunner, createExecaRunner } from './exec.ts';
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
 * deadline (the volume's reason is then FilesystemUnresponsive).
 */
export async function statWithDeadline(path: string, opts: DeadlineStatOptions = {}): Promise<DeadlineStat> {
  const timeoutMs = opts.timeoutMs ?? UNRESPONSIVE_AFTER_MS;
  const run = opts.runner ?? createExecaRunner();
  const res = await run({
    file: 'stat',
    args: [...(opts.follow ? ['-L'] : []), '--printf=%f', '--', path],
    timeoutMs,
  });
  if (res.timedOut)
    return {
      state: 'timed-out',
      message: `stat ${path}: no answer within ${timeoutMs} ms: the filesystem is not responding (a stopped FUSE daemon or an unreachable NFS server?)`,
    };
  if (res.exitCode === 0 && /^[0-9a-f]+$/.test(res.output)) return { state: 'ok', type: typeOf(res.output) };
  if (res.spawnErrorCode)
    return { state: 'error', code: res.spawnErrorCode, message: `cannot run stat: ${res.spawnErrorCode}` };
  const text = /: ([^:]+)$/.exec(res.output.trim())?.[1] ?? res.output.trim();
  return { state: 'error', code: ERRNO_BY_TEXT[text] ?? 'EUNKNOWN', message: `stat ${path}: ${text}` };
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
export async function unresponsiveMounts(
  mounts: readonly MountInfo[],
  path: string,
  opts: Omit<DeadlineStatOptions, 'follow'> = {},
): Promise<{ mountPoint: string; message: string }[]> {
  const candidates = mounts
    .filter((m) => (m.mountPoint === path || m.mountPoint.startsWith(`${path}/`)) && SERVED_FS.test(m.fsType))
    .map((m) => m.mountPoint)
    .sort((a, b) => b.length - a.length);
  const out: { mountPoint: string; message: string }[] = [];
  for (const mountPoint of new Set(candidates)) {
    const st = await statWithDeadline(mountPoint, opts);
    if (st.state === 'timed-out') out.push({ mountPoint, message: st.message });
  }
  return out;
}
