// The filesystem calls plugins make, as one small interface the host hands
// them (VolumeHost.getFs), the way mount.Interface is the mount layer's: the
// daemon's is node:fs itself; `podvol plan` hands them a recording one
// (src/agent/ops/plan-fs.ts) so that their real SetUp and TearDown run without
// touching the host. Paths may be `/proc/self/fd/<fd>/...` magic links of an
// open directory (safe-fs.ts works that way), so an implementation resolves them.
import { close, constants, fchmod, fchown, fstat, writeFile } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { promisify } from 'node:util';
import { errnoCode } from '../errno.ts';
import { mountIdOf } from '../mount/target.ts';
import { type OpenBeneath, openat2Beneath } from './openat2.ts';

/** The part of fs.Stats podvol reads. */
export interface FsStats {
  dev: number;
  ino: number;
  mode: number;
  size: number;
  uid: number;
  gid: number;
  isDirectory(): boolean;
  isFile(): boolean;
  isSymbolicLink(): boolean;
  isSocket(): boolean;
  isBlockDevice(): boolean;
  isCharacterDevice(): boolean;
}

/** What a `du` walk reads of an lstat (disk-usage.ts), exact: inode numbers and block counts may pass 2^53. */
export interface FsBigStats {
  dev: bigint;
  ino: bigint;
  nlink: bigint;
  /** 512-byte blocks allocated. */
  blocks: bigint;
  isDirectory(): boolean;
}

/** An open file or directory (node's FileHandle, narrowed). */
export interface FsHandle {
  readonly fd: number;
  stat(): Promise<FsStats>;
  chmod(mode: number): Promise<void>;
  chown(uid: number, gid: number): Promise<void>;
  writeFile(data: string | Uint8Array): Promise<void>;
  close(): Promise<void>;
}

/** node:fs/promises as podvol uses it. Errors carry node's errno `code`s (ENOENT, EEXIST, ELOOP...). */
export interface FsOps {
  open(path: string, flags: number, mode?: number): Promise<FsHandle>;
  /**
   * openat2(2) of `rel` below the open directory `dirfd` with RESOLVE_BENEATH,
   * RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV: one call
   * with the guarantee of safe-fs's walk (ELOOP for a symlink anywhere, EXDEV
   * for a mount point, ENOTDIR). Rejects with ENOSYS where the kernel or the
   * addon has none; absent on filesystems that are not the host's (safe-fs
   * then walks).
   */
  openBeneath?(dirfd: number, rel: string, flags: number, mode?: number): Promise<FsHandle>;
  /** The `mnt_id` of an open fd (/proc/self/fdinfo): which mount it lies on. */
  mountIdOf(fd: number): Promise<number>;
  lstat(path: string): Promise<FsStats>;
  /** lstat with bigint fields (node's `{ bigint: true }`). */
  lstatBig(path: string): Promise<FsBigStats>;
  stat(path: string): Promise<FsStats>;
  /** access(2) F_OK: after a stat's ENOENT, tells a stale handle from a missing path (mount-utils PathExists). */
  access(path: string): Promise<void>;
  /** statfs(2) f_type: which filesystem holds `path`. */
  statfsType(path: string): Promise<number>;
  readdir(path: string): Promise<string[]>;
  /** At most `max` names of a directory, without reading a huge one whole. */
  readdirSome(path: string, max: number): Promise<string[]>;
  readFile(path: string): Promise<Buffer>;
  readlink(path: string): Promise<string>;
  /** realpath(3): every symlink on the way resolved (subPath's one evaluation before its walk). */
  realpath(path: string): Promise<string>;
  /** mkdir(2): EEXIST when anything is there; `mode` minus the umask. */
  mkdir(path: string, mode: number): Promise<void>;
  symlink(target: string, path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  rmdir(path: string): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
  chown(path: string, uid: number, gid: number): Promise<void>;
  lchown(path: string, uid: number, gid: number): Promise<void>;
}

export const { O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC, O_APPEND, O_DIRECTORY, O_NOFOLLOW } = constants;
/** O_PATH (Linux, same value on x86-64 and arm64); node does not export it. */
export const O_PATH = 0o10000000;

async function readdirSome(path: string, max: number): Promise<string[]> {
  const names: string[] = [];
  const d = await fsp.opendir(path, { bufferSize: 128 });
  try {
    for await (const e of d) {
      names.push(e.name);
      if (names.length >= max) break;
    }
  } finally {
    await d.close().catch(() => {});
  }
  return names;
}

const fstatAsync = promisify(fstat);
const fchmodAsync = promisify(fchmod);
const fchownAsync = promisify(fchown);
const writeFileAsync = promisify(writeFile);
const closeAsync = promisify(close);

/**
 * A descriptor opened outside node (by the openat2 addon) as an FsHandle.
 * Node has no public way to wrap a raw fd in a FileHandle; the fd-taking
 * callback calls run on the same thread pool.
 */
class RawFdHandle implements FsHandle {
  #fd: number;
  constructor(fd: number) {
    this.#fd = fd;
  }
  get fd(): number {
    return this.#fd;
  }
  async stat(): Promise<FsStats> {
    return fstatAsync(this.#live());
  }
  async chmod(mode: number): Promise<void> {
    return fchmodAsync(this.#live(), mode);
  }
  async chown(uid: number, gid: number): Promise<void> {
    return fchownAsync(this.#live(), uid, gid);
  }
  async writeFile(data: string | Uint8Array): Promise<void> {
    return writeFileAsync(this.#live(), data);
  }
  async close(): Promise<void> {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    // Marked closed first: a second close must not close a number the kernel has handed out again.
    this.#fd = -1;
    await closeAsync(fd);
  }
  #live(): number {
    if (this.#fd < 0) throw Object.assign(new Error('EBADF: file handle closed'), { code: 'EBADF' });
    return this.#fd;
  }
}

function hostOps(beneath: OpenBeneath | undefined): Readonly<FsOps> {
  return Object.freeze<FsOps>({
    open: (path, flags, mode) => fsp.open(path, flags, mode),
    ...(beneath && {
      openBeneath: async (dirfd, rel, flags, mode) => new RawFdHandle(await beneath(dirfd, rel, flags, mode)),
    }),
    mountIdOf: async (fd) => mountIdOf(fd),
    lstat: (path) => fsp.lstat(path),
    lstatBig: (path) => fsp.lstat(path, { bigint: true }),
    stat: (path) => fsp.stat(path),
    access: (path) => fsp.access(path),
    statfsType: async (path) => (await fsp.statfs(path)).type,
    readdir: (path) => fsp.readdir(path),
    readdirSome,
    readFile: (path) => fsp.readFile(path),
    readlink: (path) => fsp.readlink(path),
    realpath: (path) => fsp.realpath(path),
    mkdir: (path, mode) => fsp.mkdir(path, { mode }).then(() => {}),
    symlink: (target, path) => fsp.symlink(target, path),
    rename: (from, to) => fsp.rename(from, to),
    unlink: (path) => fsp.unlink(path),
    rmdir: (path) => fsp.rmdir(path),
    chmod: (path, mode) => fsp.chmod(path, mode),
    chown: (path, uid, gid) => fsp.chown(path, uid, gid),
    lchown: (path, uid, gid) => fsp.lchown(path, uid, gid),
  });
}

/** The host's filesystem, with openat2 where the kernel has it, and without (walks only). */
const hostFsOps = { openat2: hostOps(openat2Beneath()), walk: hostOps(undefined) };

/**
 * The host's filesystem (one object each way: the calls hold no state).
 * `PODVOL_SAFE_FS=walk` in the environment (or `{ openat2: false }`) hands
 * out the one without openat2, so that safe-fs walks every path component by
 * component as on a kernel before 5.6: the tests run both ways.
 */
export function nodeFsOps({
  openat2 = process.env.PODVOL_SAFE_FS !== 'walk',
}: {
  openat2?: boolean;
} = {}): FsOps {
  return openat2 ? hostFsOps.openat2 : hostFsOps.walk;
}

/**
 * mkdir -p of a trusted path (an operator's --root-dir: symlinks on the way are
 * followed, as mkdir(1) follows them); each missing directory gets `mode`
 * minus the umask. For paths below such a root, safe-fs's mkdirAllBeneath.
 */
export async function mkdirAllTrusted(fs: FsOps, path: string, mode: number): Promise<void> {
  const parts = path.split('/').filter((p) => p !== '');
  for (let n = 1; n <= parts.length; n++) {
    const dir = `/${parts.slice(0, n).join('/')}`;
    try {
      await fs.mkdir(dir, mode);
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
  }
  if (!(await fs.stat(path)).isDirectory())
    throw Object.assign(new Error(`ENOTDIR: ${path} is not a directory`), { code: 'ENOTDIR' });
}

/** One entry of pathsBelow: its path relative to the root, and whether an lstat found a directory. */
export interface PathBelow {
  rel: string;
  isDirectory: boolean;
}

/**
 * Every path below `root`, relative to it, parents before children, without
 * following symlinks (a link to a directory is an entry, not entered).
 * Unreadable parts are skipped, as kubelet's Walk visitors ignore errors: a
 * directory that cannot be read has no entries, an entry that cannot be
 * lstat-ed is no directory. Path-based: for podvol's own trees (the atomic
 * writer's payload, the plugins directory), not for a volume's contents.
 */
export async function pathsBelow(
  fs: FsOps,
  root: string,
  rel = '',
  out: PathBelow[] = [],
): Promise<PathBelow[]> {
  let names: string[];
  try {
    names = await fs.readdir(rel ? `${root}/${rel}` : root);
  } catch {
    return out;
  }
  for (const name of names) {
    const p = rel ? `${rel}/${name}` : name;
    const entry = { rel: p, isDirectory: false };
    out.push(entry);
    entry.isDirectory = (await fs.lstat(`${root}/${p}`).catch(() => undefined))?.isDirectory() ?? false;
    if (entry.isDirectory) await pathsBelow(fs, root, p, out);
  }
  return out;
}
