// Mount and unmount targets by handle, not by path (runc's WithProcfd).
//
// A path checked and then handed to mount(8) is looked up again by the
// kernel when mount(2) runs: a directory on the way swapped for a symlink in
// between (by anything that can write there) sends the mount elsewhere. So the
// target is opened once, O_PATH|O_NOFOLLOW, the kernel's own name for what was
// opened (readlink of /proc/self/fd/N) must be the target itself, character for
// character (no symlink anywhere on the way, nothing swapped), and mount(8)
// gets `/proc/<pid>/fd/N` with --no-canonicalize: the kernel mounts on the
// object that was checked, whatever the path says by then. Afterwards the
// target is opened again and must lead to a new mount on top of that object.
//
// An unmount cannot hold the mount itself open (an open descriptor keeps it
// busy), so it holds the target's parent directory, checked the same way, and
// names the last component through it (`/proc/<pid>/fd/N/<name>`) after a
// readlink found no symlink there. umount(8) has no way to refuse a symlink at
// that last component (umount2's UMOUNT_NOFOLLOW is not reachable through it),
// so a swap of that one name between the readlink and the umount(2) remains; the
// parents of podvol's volume and subpath directories are podvol's own, which
// no container can write.
import { constants, readFileSync } from 'node:fs';
import { type FileHandle, open, readlink } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { errnoCode } from '../errno.ts';
import type { VolumeReason } from '../reasons.ts';

/** O_PATH (Linux, the same value on x86-64 and arm64); node does not export it. */
export const O_PATH = 0o10000000;
const { O_NOFOLLOW, O_DIRECTORY } = constants;

/** A target that is not where its path says, or is a symlink: nothing was mounted or unmounted. */
export class UnsafeTargetError extends Error {
  readonly reason = 'UnsafePath' satisfies VolumeReason;
  readonly code = 'UnsafePath';
  readonly target: string;
  constructor(target: string, why: string) {
    super(`refusing to mount or unmount at ${target}: ${why}`);
    this.name = 'UnsafeTargetError';
    this.target = target;
  }
}

/**
 * The `mnt_id` of an open descriptor: which mount the object it holds lies on.
 * Read synchronously on purpose: every component of every safe-fs walk asks
 * for it (tens per volume operation), and fs/promises' readFile is an open,
 * fstat, reads and a close, each a round trip through libuv's thread pool
 * (P1 in the README). The kernel prints fdinfo from the open file itself
 * without calling into its filesystem, so even a fd on a hung FUSE or NFS
 * mount answers at once: the read cannot block the event loop.
 */
export function mountIdOf(fd: number): number {
  const info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
  const m = /^mnt_id:\s*(\d+)/m.exec(info);
  if (!m) throw new Error(`no mnt_id in /proc/self/fdinfo/${fd}`);
  return Number(m[1]);
}

/** An open target (or its parent): what mount(8)/umount(8) get instead of the path. */
export interface TargetHandle {
  /** `/proc/<pid>/fd/<fd>` (mount), or `/proc/<pid>/fd/<parent fd>/<name>` (unmount). */
  readonly procPath: string;
  /** The mount the opened object lies on (0 where unknown). */
  readonly mountId: number;
  close(): Promise<void>;
}

/** How targets are opened; the simulated tests hand a pass-through one (their targets do not exist). */
export interface TargetOpener {
  /** The target itself, for mount. */
  open(target: string): Promise<TargetHandle>;
  /** After a mount through `h`: the mount now at `target`, checked to sit on `h`'s object; throws if not. */
  openMounted(target: string, h: TargetHandle): Promise<TargetHandle>;
  /** The target's parent, with the last component checked not to be a symlink, for unmount. */
  openParent(target: string): Promise<TargetHandle>;
  /** The mount sitting on `h`'s object wherever that object is now, if any (to undo a misplaced mount). */
  openOnTop(h: TargetHandle): Promise<TargetHandle | undefined>;
}

const procFd = (fd: number) => `/proc/${process.pid}/fd/${fd}`;

/** open(O_PATH|O_NOFOLLOW) and the kernel's name for it, which must be `abs`. */
async function openExactly(abs: string, what: string, extra = 0): Promise<FileHandle> {
  const fh = await open(abs, O_PATH | O_NOFOLLOW | extra);
  try {
    const real = await readlink(`/proc/self/fd/${fh.fd}`);
    if (real !== abs)
      throw new UnsafeTargetError(abs, `${what} resolves to ${real} (a symlink on the way, or swapped)`);
    if ((await fh.stat()).isSymbolicLink()) throw new UnsafeTargetError(abs, `${what} is a symlink`);
    return fh;
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/**
 * A symlink at `path` (a name in a directory held open) is UnsafePath. readlink,
 * not lstat: it answers from the directory entry and the cached dentry, never
 * asking the filesystem mounted there, which may be one that hangs (the force
 * unmount of an unresponsive FUSE). EINVAL is "not a symlink"; ENOENT is left
 * to umount and the mount table.
 */
async function refuseSymlink(path: string, target: string): Promise<void> {
  const link = await readlink(path).catch((err: unknown) => {
    const code = errnoCode(err);
    if (code === 'EINVAL' || code === 'ENOENT') return undefined;
    throw err;
  });
  if (link !== undefined) throw new UnsafeTargetError(target, `the target is a symlink to ${link}`);
}

function handleOf(fh: FileHandle, path: string): TargetHandle {
  return { procPath: path, mountId: mountIdOf(fh.fd), close: () => fh.close() };
}

export const realTargets: TargetOpener = {
  async open(target) {
    const fh = await openExactly(resolve(target), 'the target');
    try {
      return handleOf(fh, procFd(fh.fd));
    } catch (err) {
      await fh.close();
      throw err;
    }
  },

  async openMounted(target, h) {
    const abs = resolve(target);
    const fh = await openExactly(abs, 'the mounted target').catch((err: unknown) => {
      throw err instanceof UnsafeTargetError
        ? err
        : new UnsafeTargetError(abs, `cannot open it after the mount: ${String(err)}`);
    });
    try {
      const top = handleOf(fh, procFd(fh.fd));
      // The path must now lead onto a mount other than the one the checked object lies on.
      if (top.mountId === h.mountId)
        throw new UnsafeTargetError(abs, 'nothing is mounted there after the mount');
      return top;
    } catch (err) {
      await fh.close();
      throw err;
    }
  },

  async openOnTop(h) {
    // The kernel's current name for the checked object; gone objects read "... (deleted)".
    const where = await readlink(h.procPath);
    if (!where.startsWith('/') || where.endsWith(' (deleted)')) return undefined;
    const fh = await open(where, O_PATH | O_NOFOLLOW);
    try {
      const top = handleOf(fh, procFd(fh.fd));
      if (top.mountId !== h.mountId && (await readlink(`/proc/self/fd/${fh.fd}`)) === where) return top;
    } catch {}
    await fh.close();
    return undefined;
  },

  async openParent(target) {
    const abs = resolve(target);
    const parent = dirname(abs);
    const name = basename(abs);
    // Already named through a directory its caller holds open (subpath cleanup): that handle is the parent.
    const held = /^\/proc\/(self|\d+)\/fd\/(\d+)$/.exec(parent);
    if (held && (held[1] === 'self' || held[1] === String(process.pid))) {
      await refuseSymlink(`/proc/self/fd/${held[2]}/${name}`, abs);
      return { procPath: `${procFd(Number(held[2]))}/${name}`, mountId: 0, close: async () => {} };
    }
    const fh = await openExactly(parent, 'its parent directory', O_DIRECTORY);
    try {
      await refuseSymlink(`/proc/self/fd/${fh.fd}/${name}`, abs);
      // An unmount never asks which mount the parent lies on: no fdinfo read.
      return { procPath: `${procFd(fh.fd)}/${name}`, mountId: 0, close: () => fh.close() };
    } catch (err) {
      await fh.close();
      throw err;
    }
  },
};

/** For targets that do not exist (simulated tests): the path itself, checked by nothing. */
export const pathTargets: TargetOpener = {
  open: async (target) => ({ procPath: target, mountId: 0, close: async () => {} }),
  openMounted: async (target) => ({ procPath: target, mountId: 0, close: async () => {} }),
  openParent: async (target) => ({ procPath: target, mountId: 0, close: async () => {} }),
  openOnTop: async () => undefined,
};
