// The one safe filesystem primitive: open, create and remove paths *beneath* a
// trusted root without ever following a symlink or crossing a mount, even when
// something (a running container, a hostile hostPath) swaps entries while we
// work. kubelet gets this from openat/mkdirat/unlinkat (pkg/volume/util/subpath,
// pkg/util/removeall); Node has no *at calls, but the magic link
// `/proc/self/fd/<dirfd>/<name>` gives exactly their semantics: the kernel jumps
// to the open directory itself (wherever it has been moved since) and looks up
// only `<name>` in it, so with O_NOFOLLOW / lstat / unlink / rmdir / mkdir the
// last component is never followed. A mount is detected by comparing the
// `mnt_id:` of a child's fd (/proc/self/fdinfo) with its parent's, which also
// catches bind mounts of the same filesystem (st_dev would not).
//
// The root is trusted (it is followed if it is a symlink: an operator may make
// /var/lib/podvol one). Every component below it is untrusted.

import { randomBytes } from 'node:crypto';
import { isAbsolute, resolve, sep } from 'node:path';
import { errnoCode } from '../errno.ts';
import type * as mount from '../mount/types.ts';
import type { VolumeReason } from '../reasons.ts';
import type { FsHandle, FsOps, FsStats } from './fs.ts';
import { O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_PATH, O_RDONLY, O_TRUNC, O_WRONLY } from './fs.ts';
import { hasBacksteps } from './paths.ts';

// libuv adds O_CLOEXEC to every open(2) itself.
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** Directory fds held open at once by one removal; deeper trees are moved up (see removeChildren). */
const MAX_OPEN_DEPTH = 64;
/** A directory refilled by a running writer is retried this many times before giving up. */
const MAX_RMDIR_ATTEMPTS = 10;
const READDIR_BATCH = 1024;
/**
 * openat2 fails with EAGAIN when a rename or mount elsewhere races its lookup
 * (the kernel cannot vouch for the result); past this many tries the walk,
 * which has no such failure, takes over.
 */
const MAX_BENEATH_ATTEMPTS = 3;

export type UnsafeKind = 'symlink' | 'mount' | 'notDirectory' | 'badPath';

/** Something below the root was a symlink, a mount point, not a directory, or the path escapes. */
export class UnsafePathError extends Error {
  readonly reason = 'UnsafePath' satisfies VolumeReason;
  readonly kind: UnsafeKind;
  /** The path as the caller named it (never a /proc/self/fd path). */
  readonly path: string;
  constructor(kind: UnsafeKind, path: string, detail: string) {
    super(`unsafe path ${path}: ${detail}`);
    this.name = 'UnsafePathError';
    this.kind = kind;
    this.path = path;
  }
}

export interface BeneathOptions {
  /**
   * Mount points that may be passed through: `false` (default) none, `'last'`
   * only the final component (a mounted volume itself), `true` any.
   */
  crossMounts?: boolean | 'last';
}

/**
 * The components of a path relative to a root. Empty and `.` components are
 * dropped; `..` anywhere, and an absolute path, are refused: a path built from
 * pod data is checked here before it is used.
 */
export function splitBeneath(rel: string, displayRoot = ''): string[] {
  if (isAbsolute(rel)) throw new UnsafePathError('badPath', rel, 'must be relative to its root');
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) {
    throw new UnsafePathError(
      'badPath',
      displayRoot ? `${displayRoot}/${rel}` : rel,
      "must not contain '..'",
    );
  }
  return parts;
}

/**
 * `path` (absolute, built by podvol) as components below `root`. Refuses a
 * path that is not lexically below root or that contains `..`.
 */
export function relativeBeneath(root: string, path: string): string {
  if (hasBacksteps(path)) throw new UnsafePathError('badPath', path, "must not contain '..'");
  const r = resolve(root);
  const p = resolve(path);
  if (p === r) return '';
  if (!p.startsWith(r + sep)) throw new UnsafePathError('badPath', path, `is not below ${root}`);
  return p.slice(r.length + 1);
}

/**
 * An open directory. `procPath` names it for any path-based call (valid until
 * close); `path` is what it was opened as, for messages. Close it.
 */
export class SafeDir {
  readonly path: string;
  readonly mountId: number;
  /** The filesystem it lives on: every call made through this directory goes there. */
  readonly fs: FsOps;
  readonly #fh: FsHandle;
  /** Kept by the held directories of an operation (SafeFs.withHeldDirs): close() leaves it open until release(). */
  #held = false;

  private constructor(fs: FsOps, fh: FsHandle, path: string, mountId: number) {
    this.fs = fs;
    this.#fh = fh;
    this.path = path;
    this.mountId = mountId;
  }

  /** Opens a trusted directory by path (symlinks in it are followed). */
  static async openRoot(path: string, display: string, fs: FsOps): Promise<SafeDir> {
    const fh = await fs.open(path, O_RDONLY | O_DIRECTORY);
    try {
      return new SafeDir(fs, fh, display, await fs.mountIdOf(fh.fd));
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /**
   * The directory `rel` (components below `from`, at least one) in one
   * openat2 call (FsOps.openBeneath): the kernel follows no symlink and
   * crosses no mount on the way, so the result lies on `from`'s mount and
   * needs no mnt_id read. Any refusal rejects with the kernel's errno (ELOOP,
   * EXDEV, ENOTDIR, ENOENT, ENOSYS): the caller walks instead, which refuses
   * the same things and names the component.
   */
  static async beneath(from: SafeDir, rel: string, display: string): Promise<SafeDir> {
    for (let attempt = 1; ; attempt++) {
      try {
        const fh = await openBeneathOf(from.fs)(from.fd, rel, DIR_FLAGS);
        return new SafeDir(from.fs, fh, display, from.mountId);
      } catch (err) {
        if (errnoCode(err) !== 'EAGAIN' || attempt >= MAX_BENEATH_ATTEMPTS) throw err;
      }
    }
  }

  get fd(): number {
    return this.#fh.fd;
  }

  /** `/proc/self/fd/<fd>`: in-process path-based calls act on this very directory. */
  get procPath(): string {
    return `/proc/self/fd/${this.#fh.fd}`;
  }

  /** `/proc/<pid>/fd/<fd>`: the same for a child process such as mount(8) (kubelet's subPath trick). */
  get hostProcPath(): string {
    return `/proc/${process.pid}/fd/${this.#fh.fd}`;
  }

  /** `name` (one component) inside this directory, for a path-based call that must not follow it. */
  child(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/')) {
      throw new UnsafePathError('badPath', `${this.path}/${name}`, 'not a single path component');
    }
    return `${this.procPath}/${name}`;
  }

  stat() {
    return this.#fh.stat();
  }

  chmod(mode: number): Promise<void> {
    return this.#fh.chmod(mode);
  }

  chown(uid: number, gid: number): Promise<void> {
    return this.#fh.chown(uid, gid);
  }

  /**
   * Opens the directory `name` inside this one without following a symlink.
   * A mount point is refused unless `allowMount`.
   */
  async openChild(name: string, allowMount = false): Promise<SafeDir> {
    const display = `${this.path}/${name}`;
    let fh: FsHandle;
    try {
      fh = await this.fs.open(this.child(name), DIR_FLAGS);
    } catch (err) {
      // O_NOFOLLOW|O_DIRECTORY on a symlink: ELOOP or ENOTDIR depending on the kernel.
      if (errnoCode(err) === 'ELOOP') throw new UnsafePathError('symlink', display, 'is a symbolic link');
      if (errnoCode(err) === 'ENOTDIR') {
        throw new UnsafePathError('notDirectory', display, 'is not a directory (or is a symbolic link)');
      }
      throw err;
    }
    try {
      const id = await this.fs.mountIdOf(fh.fd);
      if (id !== this.mountId && !allowMount) {
        throw new UnsafePathError('mount', display, 'is a mount point');
      }
      return new SafeDir(this.fs, fh, display, id);
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /** An O_PATH fd of the entry `name`, whatever it is (a symlink is not followed); undefined when there is none. */
  async openEntry(name: string): Promise<FsHandle | undefined> {
    try {
      return await this.fs.open(this.child(name), O_PATH | O_NOFOLLOW);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  /**
   * lchown + chmod of the entry `name` without following it, even if it is
   * swapped for a symlink meanwhile: both act on an O_PATH fd of what was
   * there (a symlink is chowned as a link and never chmodded). `mode` gets the
   * lstat result and returns the new mode, or undefined to leave it.
   */
  async chownChmodChild(name: string, gid: number, mode: (st: FsStats) => number | undefined): Promise<void> {
    const fh = await this.openEntry(name);
    if (!fh) return;
    try {
      const self = `/proc/self/fd/${fh.fd}`;
      const st = await fh.stat();
      if (st.isSymbolicLink()) {
        // Swapping a link for another link gains nothing; the link itself is chowned.
        await this.fs.lchown(this.child(name), -1, gid).catch(() => {});
        return;
      }
      // Through the magic link: the very inode the O_PATH fd holds, not a re-walk of the name.
      await this.fs.chown(self, -1, gid).catch(() => {});
      const m = mode(st);
      if (m !== undefined) await this.fs.chmod(self, m).catch(() => {});
    } finally {
      await fh.close();
    }
  }

  /**
   * Creates or truncates the file `name` in this directory and writes `data`;
   * a symlink at `name` is refused (O_NOFOLLOW), never written through. The
   * file gets exactly `mode` whatever the umask, unless `exactMode` is false
   * (then open(2) applies the umask, as Go's os.Create).
   */
  async writeFile(
    name: string,
    data: string | Uint8Array,
    mode = 0o644,
    { exactMode = true }: { exactMode?: boolean } = {},
  ): Promise<void> {
    let fh: FsHandle;
    try {
      fh = await this.fs.open(this.child(name), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode);
    } catch (err) {
      if (errnoCode(err) === 'ELOOP')
        throw new UnsafePathError('symlink', `${this.path}/${name}`, 'is a symbolic link');
      throw err;
    }
    try {
      await fh.writeFile(data);
      if (exactMode) await fh.chmod(mode);
    } finally {
      await fh.close();
    }
  }

  /** A directory held by an operation (SafeFs.withHeldDirs) stays open until the operation ends. */
  close(): Promise<void> {
    if (this.#held) return Promise.resolve();
    return this.#fh.close();
  }

  /**
   * For an operation's held directories only: close() does nothing until
   * release(), so every walk of the operation that is handed this directory
   * can close it as usual.
   */
  hold(): void {
    this.#held = true;
  }

  /** Ends hold() and closes the directory; nothing if it is not held (so it is closed once). */
  release(): Promise<void> {
    if (!this.#held) return Promise.resolve();
    this.#held = false;
    return this.#fh.close();
  }
}

/** `fs.openBeneath`, or one that reports ENOSYS (the walk's filesystems that have none). */
function openBeneathOf(fs: FsOps): NonNullable<FsOps['openBeneath']> {
  const f = fs.openBeneath;
  if (f !== undefined) return f;
  return () =>
    Promise.reject(Object.assign(new Error('ENOSYS: no openat2 on this filesystem'), { code: 'ENOSYS' }));
}

/**
 * The directories the walks of one operation opened (SafeFs.withHeldDirs), by
 * path (one SafeFs is one filesystem): a later walk of the same operation starts from the
 * deepest one on its way instead of from its root. Only roots and directories
 * entered without crossing a mount are kept. A directory is used only by
 * walks from the root it was reached from or from below that root: a walk
 * from /r checked /r/pods (not a symlink, not a mount), a walk from the root
 * /r/pods did not check it for a walk from /r.
 */
class HeldDirs {
  readonly #byPath = new Map<string, { rootAbs: string; dir: Promise<SafeDir> }>();
  readonly #all = new Set<Promise<SafeDir>>();
  /** Once its operation has ended; a walk through its SafeFs after that (work scheduled from inside) holds nothing. */
  ended = false;

  /**
   * The directory at `abs` for a walk from `rootAbs`, opened by `open` unless
   * one usable is held (a failed open is not kept).
   */
  get(abs: string, rootAbs: string, open: () => Promise<SafeDir>): Promise<SafeDir> {
    const hit = this.#byPath.get(abs);
    if (hit && (hit.rootAbs === rootAbs || rootAbs.startsWith(`${hit.rootAbs}/`))) return hit.dir;
    const dir = open().then((d) => {
      d.hold();
      return d;
    });
    // Kept in place of the one held if usable by more walks (reached from a root above its root).
    if (!hit || hit.rootAbs.startsWith(`${rootAbs}/`)) {
      this.#byPath.set(abs, { rootAbs, dir });
      dir.catch(() => {
        if (this.#byPath.get(abs)?.dir === dir) this.#byPath.delete(abs);
      });
    }
    this.#all.add(dir);
    return dir;
  }

  /** The directory at `abs` if one usable by a walk from `rootAbs` is held (see get). */
  peek(abs: string, rootAbs: string): Promise<SafeDir> | undefined {
    const hit = this.#byPath.get(abs);
    if (hit && (hit.rootAbs === rootAbs || rootAbs.startsWith(`${hit.rootAbs}/`))) return hit.dir;
    return undefined;
  }

  /** What is below `abs` (and `abs` itself unless `keepSelf`) is being removed: later walks open it afresh. */
  forget(abs: string, keepSelf = false): void {
    for (const path of this.#byPath.keys()) {
      if ((path === abs && !keepSelf) || path.startsWith(`${abs}/`)) this.#byPath.delete(path);
    }
  }

  async releaseAll(): Promise<void> {
    this.ended = true;
    this.#byPath.clear();
    for (const p of this.#all) {
      const d = await p.catch(() => undefined);
      await d?.release().catch(() => {});
    }
  }
}

type Root = string | SafeDir;

/** Where a walk from a string root may take and keep held directories. */
interface HeldWalk {
  dirs: HeldDirs;
  /** The root, resolved. */
  abs: string;
}

/**
 * Where a walk from `root` takes and keeps held directories: `dirs`, those of
 * the operation whose SafeFs it runs through (SafeFs.withHeldDirs), if any; only walks from a string root use them.
 */
function heldWalk(dirs: HeldDirs | undefined, root: Root): HeldWalk | undefined {
  if (dirs === undefined || dirs.ended || typeof root !== 'string') return undefined;
  return { dirs, abs: resolve(root) };
}

/** Drops the held directories at (unless `keepSelf`) and below `rel`: they are being removed. */
function forgetHeld(dirs: HeldDirs | undefined, root: Root, rel: string, keepSelf = false): void {
  if (dirs === undefined || dirs.ended || typeof root !== 'string') return;
  dirs.forget(resolve(root, rel), keepSelf);
}

async function rootDir(fs: FsOps, root: Root, hw?: HeldWalk): Promise<{ dir: SafeDir; owned: boolean }> {
  if (typeof root !== 'string') return { dir: root, owned: false };
  if (hw) {
    const dir = await hw.dirs.get(hw.abs, hw.abs, () => SafeDir.openRoot(root, root, fs));
    return { dir, owned: false };
  }
  return { dir: await SafeDir.openRoot(root, root, fs), owned: true };
}

const reopen = (dir: SafeDir) => SafeDir.openRoot(dir.procPath, dir.path, dir.fs);

/**
 * Walks `parts` from `start`, closing every intermediate directory; `start` is
 * never closed. `beforeEach` runs in each directory before its next component
 * is opened (openMkdirAll creates it there). Within withHeldDirs (`hw`), a
 * component entered without crossing a mount is taken from, or kept in, the
 * operation's held directories (their close() waits for its end), and the
 * walk starts from the deepest one held on its way.
 *
 * The components that must not cross a mount (all of them, all but the last
 * with crossMounts 'last', none with crossMounts true) are first opened in one
 * openat2 call (SafeDir.beneath), whose RESOLVE_ flags refuse exactly what the
 * component-by-component walk refuses; only its result is held. When it fails
 * (a symlink or mount on the way, a component missing and to be created by
 * `beforeEach`, no openat2 on this kernel) the walk below does the same part
 * one component at a time: it creates what is missing and names what it
 * refuses, and it is as safe on its own.
 */
async function walk(
  start: SafeDir,
  parts: string[],
  opts: BeneathOptions,
  beforeEach?: (dir: SafeDir, name: string) => Promise<void>,
  hw?: HeldWalk,
): Promise<SafeDir> {
  const beneath =
    opts.crossMounts === true ? 0 : opts.crossMounts === 'last' ? parts.length - 1 : parts.length;
  const absOf = (hw: HeldWalk, n: number) => `${hw.abs === '/' ? '' : hw.abs}/${parts.slice(0, n).join('/')}`;
  let cur = start;
  let from = 0;
  try {
    if (hw) {
      for (let n = beneath; n >= 1; n--) {
        const dir = hw.dirs.peek(absOf(hw, n), hw.abs);
        if (dir === undefined) continue;
        cur = await dir;
        from = n;
        break;
      }
    }
    if (from < beneath && start.fs.openBeneath !== undefined) {
      const parent = cur;
      const open = () =>
        SafeDir.beneath(
          parent,
          parts.slice(from, beneath).join('/'),
          `${start.path}/${parts.slice(0, beneath).join('/')}`,
        );
      try {
        const next = hw ? await hw.dirs.get(absOf(hw, beneath), hw.abs, open) : await open();
        // `parent` is `start` or a held directory: neither is closed here.
        cur = next;
        from = beneath;
      } catch {
        // The walk below does it one component at a time (see above).
      }
    }
    for (let i = from; i < parts.length; i++) {
      const name = parts[i] as string;
      const last = i === parts.length - 1;
      const allow = opts.crossMounts === true || (opts.crossMounts === 'last' && last);
      const parent = cur;
      const open = async () => {
        await beforeEach?.(parent, name);
        return parent.openChild(name, allow);
      };
      let next: SafeDir;
      if (hw && !allow) {
        next = await hw.dirs.get(absOf(hw, i + 1), hw.abs, open);
      } else {
        next = await open();
      }
      if (cur !== start) await cur.close();
      cur = next;
    }
    return cur;
  } catch (err) {
    if (cur !== start) await cur.close();
    throw err;
  }
}

/**
 * Opens the directory `rel` below `root`, one component at a time, never
 * following a symlink, and (unless `crossMounts`) never entering a mount
 * point. `rel` '' opens the root itself (a new handle for a SafeDir root). The
 * caller closes the result.
 */
async function openDirBeneathIn(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
  opts: BeneathOptions = {},
): Promise<SafeDir> {
  const parts = splitBeneath(rel, typeof root === 'string' ? root : root.path);
  const hw = heldWalk(held, root);
  const { dir, owned } = await rootDir(fs, root, hw);
  if (parts.length === 0) {
    if (owned) return dir;
    return reopen(dir);
  }
  try {
    return await walk(dir, parts, opts, undefined, hw);
  } finally {
    if (owned) await dir.close();
  }
}

/** Runs `fn` with the directory `rel` below `root` open (see openDirBeneath), then closes it. */
async function withDirBeneathIn<T>(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
  fn: (dir: SafeDir) => Promise<T>,
  opts: BeneathOptions = {},
): Promise<T> {
  const dir = await openDirBeneathIn(fs, held, root, rel, opts);
  try {
    return await fn(dir);
  } finally {
    await dir.close();
  }
}

/** `rel` split into its parent (relative to root) and its last component; `refusal` if it names the root. */
function lastComponent(root: Root, rel: string, refusal: string): { parentRel: string; name: string } {
  const parts = splitBeneath(rel, typeof root === 'string' ? root : root.path);
  const name = parts.pop();
  if (name === undefined) throw new UnsafePathError('badPath', rel, refusal);
  return { parentRel: parts.join('/'), name };
}

/**
 * Opens `rel` below `root` (any file type; the final component is not
 * followed either: a symlink there opens the link itself) as an O_PATH fd,
 * for a bind mount from `/proc/<pid>/fd/<fd>`. The caller closes it.
 */
async function openPathBeneathIn(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
  opts: BeneathOptions = {},
): Promise<FsHandle> {
  const { parentRel, name } = lastComponent(root, rel, 'names the root itself');
  const parent = await openDirBeneathIn(fs, held, root, parentRel, {
    crossMounts: opts.crossMounts === true,
  });
  try {
    if (!opts.crossMounts && parent.fs.openBeneath !== undefined) {
      // One openat2: a symlink opens as the link itself (O_PATH|O_NOFOLLOW with
      // RESOLVE_NO_SYMLINKS), a mount point is EXDEV, so no mnt_id read.
      const fh = await parent.fs.openBeneath(parent.fd, name, O_PATH | O_NOFOLLOW).catch((err: unknown) => {
        if (errnoCode(err) === 'EXDEV')
          throw new UnsafePathError('mount', `${parent.path}/${name}`, 'is a mount point');
        // Anything else (ENOENT, ENOSYS, EAGAIN): the open below reports it as before.
        return undefined;
      });
      if (fh !== undefined) return fh;
    }
    const fh = await parent.fs.open(parent.child(name), O_PATH | O_NOFOLLOW);
    try {
      if ((await parent.fs.mountIdOf(fh.fd)) !== parent.mountId && !opts.crossMounts) {
        throw new UnsafePathError('mount', `${parent.path}/${name}`, 'is a mount point');
      }
    } catch (err) {
      await fh.close();
      throw err;
    }
    return fh;
  } finally {
    await parent.close();
  }
}

/**
 * mkdir -p of `rel` below `root` with mkdirat semantics: every existing
 * component must be a real directory (a symlink is refused, not followed);
 * missing ones are created with `mode` (minus the umask, as mkdir(2)). The
 * final directory is returned open (the caller closes it).
 */
async function openMkdirAllIn(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
  mode = 0o755,
  opts: BeneathOptions = {},
): Promise<SafeDir> {
  const parts = splitBeneath(rel, typeof root === 'string' ? root : root.path);
  const hw = heldWalk(held, root);
  const { dir: start, owned } = await rootDir(fs, root, hw);
  if (parts.length === 0) return owned ? start : reopen(start);
  const mkdirIfMissing = async (dir: SafeDir, name: string) => {
    try {
      await dir.fs.mkdir(dir.child(name), mode);
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
  };
  try {
    return await walk(start, parts, opts, mkdirIfMissing, hw);
  } finally {
    if (owned) await start.close();
  }
}

/**
 * rm -rf of `rel` below `root`, relative to open directory fds: no symlink is
 * ever followed (a symlink is removed as a link, wherever it is, even if it is
 * swapped in while we work), and nothing is removed across a mount boundary (a
 * mount point at or below the target stops the removal with an
 * UnsafePathError before it is entered). The components leading to the
 * target must be real directories on the root's mount. A missing target is
 * success; a target that is a symlink or file is just unlinked.
 */
async function removeAllBeneathIn(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
): Promise<void> {
  const { parentRel, name } = lastComponent(root, rel, 'refusing to remove the root itself');
  forgetHeld(held, root, rel);
  let parent: SafeDir;
  try {
    parent = await openDirBeneathIn(fs, held, root, parentRel);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw err;
  }
  try {
    await removeEntry(parent, name, 0, undefined);
  } finally {
    await parent.close();
  }
}

/** Removes everything inside the directory `rel` below root (which must exist), keeping the directory. */
async function removeContentsBeneathIn(
  fs: FsOps,
  held: HeldDirs | undefined,
  root: Root,
  rel: string,
  opts: BeneathOptions = {},
): Promise<void> {
  forgetHeld(held, root, rel, true);
  await withDirBeneathIn(
    fs,
    held,
    root,
    rel,
    (dir) => removeChildren(dir, 0, { top: dir, movedUp: 0 }),
    opts,
  );
}

const readNames = (dir: SafeDir): Promise<string[]> => dir.fs.readdirSome(dir.procPath, READDIR_BATCH);

/** Removal state shared by one removeAll: how many directories were moved up into the top one. */
interface Removal {
  top: SafeDir;
  movedUp: number;
}

/**
 * Empties `dir`. At depth MAX_OPEN_DEPTH a subdirectory is renamed up into
 * the top directory instead of being entered, so a hostile million-level tree
 * costs a bounded number of fds. A directory a writer keeps refilling is given
 * up after MAX_RMDIR_ATTEMPTS passes (ENOTEMPTY), so a removal always ends.
 */
async function removeChildren(dir: SafeDir, depth: number, r: Removal): Promise<void> {
  let passes = 0;
  for (;;) {
    const names = await readNames(dir);
    if (names.length === 0) return;
    const budget = MAX_RMDIR_ATTEMPTS + (dir === r.top ? r.movedUp : 0);
    if (names.length < READDIR_BATCH && ++passes > budget) {
      const err = new Error(`ENOTEMPTY: ${dir.path} keeps being refilled while it is removed`);
      throw Object.assign(err, { code: 'ENOTEMPTY' });
    }
    for (const name of names) await removeEntry(dir, name, depth, r);
  }
}

async function removeEntry(
  parent: SafeDir,
  name: string,
  depth: number,
  r: Removal | undefined,
): Promise<void> {
  const at = parent.child(name);
  for (let attempt = 1; ; attempt++) {
    // Not a directory (a file, a symlink, whatever was swapped in): unlink never follows.
    try {
      await parent.fs.unlink(at);
      return;
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT') return;
      if (code === 'EBUSY') throw new UnsafePathError('mount', `${parent.path}/${name}`, 'is a mount point');
      if (code !== 'EISDIR' && code !== 'EPERM') throw err;
    }
    let child: SafeDir;
    try {
      child = await parent.openChild(name);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      // Swapped for a symlink or file since the unlink: unlink it next round.
      if (err instanceof UnsafePathError && err.kind !== 'mount' && attempt < MAX_RMDIR_ATTEMPTS) continue;
      throw err;
    }
    try {
      if (r !== undefined && depth >= MAX_OPEN_DEPTH) {
        // Same mount (checked by openChild), so rename(2) works; the top loop meets it again.
        await parent.fs.rename(at, r.top.child(`.podvol-removing-${randomBytes(6).toString('hex')}`));
        r.movedUp++;
        return;
      }
      await removeChildren(child, depth + 1, r ?? { top: child, movedUp: 0 });
    } finally {
      await child.close();
    }
    try {
      await parent.fs.rmdir(at);
      return;
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT') return;
      // ENOTDIR: swapped for a symlink after we emptied it; ENOTEMPTY: refilled. Go round again.
      if ((code === 'ENOTDIR' || code === 'ENOTEMPTY' || code === 'EEXIST') && attempt < MAX_RMDIR_ATTEMPTS)
        continue;
      throw err;
    }
  }
}

/**
 * Mount points at or below `path` by the mount table: what orphan clean-up
 * adopts and tears down before it removes a pod directory (the removal itself
 * refuses any mount it meets, by mnt_id).
 */
export async function mountPointsBelow(mounter: mount.Interface, path: string): Promise<string[]> {
  return mountPointsIn(await mounter.list(), path);
}

/** mountPointsBelow on a table already read (one read for many directories). */
export function mountPointsIn(table: readonly { mountPoint: string }[], path: string): string[] {
  const root = resolve(path);
  return table.map((m) => m.mountPoint).filter((mp) => mp === root || mp.startsWith(root + sep));
}

/** The safe primitives on one filesystem: what the host hands plugins (VolumeHost.getFs). */
export interface SafeFs {
  /** The plain calls, for what is not beneath a root (a hostPath, a stat). */
  readonly ops: FsOps;
  /**
   * Runs one volume operation (a SetUp, a TearDown and their records) and
   * hands it `opFs`: these primitives on the same filesystem with the
   * directories its walks open kept open until `fn` ends. The operation
   * passes `opFs` to what it calls (MounterArgs.fs, UnmounterArgs.fs,
   * records): each step walks from the deepest directory an earlier step
   * already opened (the pod's, its volumes directory) instead of from the
   * root, and nothing else changes: every component not held is opened as
   * before, no symlink is followed and no mount is entered. A held directory
   * is the very one its walk checked (an fd), wherever it is moved meanwhile;
   * one removed by removeAllBeneath is dropped so that a later step opens (or
   * re-creates) it. Walks through this SafeFs itself (or another) hold
   * nothing, nor do walks through `opFs` once `fn` has ended (work scheduled
   * from inside it).
   */
  withHeldDirs<T>(fn: (opFs: SafeFs) => Promise<T>): Promise<T>;
  openRoot(path: string): Promise<SafeDir>;
  openDirBeneath(root: Root, rel: string, opts?: BeneathOptions): Promise<SafeDir>;
  withDirBeneath<T>(
    root: Root,
    rel: string,
    fn: (dir: SafeDir) => Promise<T>,
    opts?: BeneathOptions,
  ): Promise<T>;
  openPathBeneath(root: Root, rel: string, opts?: BeneathOptions): Promise<FsHandle>;
  /** openMkdirAll without the open directory. */
  mkdirAllBeneath(root: Root, rel: string, mode?: number, opts?: BeneathOptions): Promise<void>;
  openMkdirAll(root: Root, rel: string, mode?: number, opts?: BeneathOptions): Promise<SafeDir>;
  removeAllBeneath(root: Root, rel: string): Promise<void>;
  removeContentsBeneath(root: Root, rel: string, opts?: BeneathOptions): Promise<void>;
}

/**
 * The primitives above on `fs` (a SafeDir root carries its own). Nothing is
 * held here: an operation gets its own held directories from withHeldDirs,
 * as an argument, never from the context it runs in.
 */
export function createSafeFs(fs: FsOps): SafeFs {
  return safeFsHolding(fs, undefined);
}

/** The primitives on `fs` whose walks take and keep directories in `held` (an operation's), if any. */
function safeFsHolding(fs: FsOps, held: HeldDirs | undefined): SafeFs {
  return {
    ops: fs,
    withHeldDirs: async (fn) => {
      const dirs = new HeldDirs();
      try {
        return await fn(safeFsHolding(fs, dirs));
      } finally {
        await dirs.releaseAll();
      }
    },
    openRoot: (path) => SafeDir.openRoot(path, path, fs),
    openDirBeneath: (root, rel, opts) => openDirBeneathIn(fs, held, root, rel, opts),
    withDirBeneath: (root, rel, fn, opts) => withDirBeneathIn(fs, held, root, rel, fn, opts),
    openPathBeneath: (root, rel, opts) => openPathBeneathIn(fs, held, root, rel, opts),
    mkdirAllBeneath: async (root, rel, mode, opts) =>
      (await openMkdirAllIn(fs, held, root, rel, mode, opts)).close(),
    openMkdirAll: (root, rel, mode, opts) => openMkdirAllIn(fs, held, root, rel, mode, opts),
    removeAllBeneath: (root, rel) => removeAllBeneathIn(fs, held, root, rel),
    removeContentsBeneath: (root, rel, opts) => removeContentsBeneathIn(fs, held, root, rel, opts),
  };
}
