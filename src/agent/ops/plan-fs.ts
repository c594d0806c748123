// The recording filesystem of `podvol plan`: the FsOps plugins get from the
// plan's VolumeHost. It is an overlay on the host: what exists on the host is
// read (lstat, readdir, readlink, file contents) the first time a path is
// looked up, and never written; everything the plugins create, change or
// remove happens in memory and is reported as a step. Mounts come from the
// plan's fake mounter (mnt_id and statfs follow its table), so the plugins'
// own checks (a symlink refused, a mount point not crossed, tmpfs detected)
// run as they do on the host.
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { posix } from 'node:path';
import { mountContaining } from '../../mount/mountinfo.ts';
import { HUGETLBFS_MAGIC, TMPFS_MAGIC } from '../../mount/probe.ts';
import type { MountInfo } from '../../mount/types.ts';
import type { FsHandle, FsOps, FsStats } from '../../volumehost/fs.ts';
import { O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_PATH, O_TRUNC, O_WRONLY } from '../../volumehost/fs.ts';

/** One change to the filesystem, in the words of plan-format.ts. */
export type FsStep =
  | { action: 'mkdir'; path: string; mode: number }
  | { action: 'write'; path: string; mode: number; data: Buffer }
  | { action: 'chmod'; path: string; mode: number }
  | { action: 'chown'; path: string; uid: number; gid: number }
  | { action: 'symlink'; path: string; target: string }
  | { action: 'rename'; path: string; to: string }
  | { action: 'rm'; path: string };

type Kind = 'dir' | 'file' | 'symlink' | 'socket' | 'char' | 'block' | 'fifo';

const TYPE_BITS: Record<Kind, number> = {
  dir: 0o040000,
  file: 0o100000,
  symlink: 0o120000,
  socket: 0o140000,
  char: 0o020000,
  block: 0o060000,
  fifo: 0o010000,
};

interface Node {
  kind: Kind;
  ino: number;
  /** Permission and special bits (0o7777). */
  perm: number;
  uid: number;
  gid: number;
  parent: Node | undefined;
  name: string;
  /** The host path it mirrors, read lazily; undefined for what the plan created. */
  host?: string;
  data?: Buffer;
  size: number;
  target?: string;
  children?: Map<string, Node>;
  /** Host entries of a directory that were removed (or hidden by a mount) in the plan. */
  gone?: Set<string>;
  /** Every host entry is in `children` (or `gone`): the host need not be asked again. */
  complete?: boolean;
}

const MAX_SYMLINKS = 40;

function fsError(code: string, syscall: string, path: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${code}: ${syscall} '${path}'`);
  err.code = code;
  err.syscall = syscall;
  err.path = path;
  return err;
}

function kindOf(st: import('node:fs').Stats): Kind {
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'char';
  if (st.isBlockDevice()) return 'block';
  if (st.isFIFO()) return 'fifo';
  return 'file';
}

/** The kernel's answer where the plan knows no better: ext4's statfs type. */
const EXT4_MAGIC = 0xef53;
const MAGIC: Record<string, number> = { tmpfs: TMPFS_MAGIC, hugetlbfs: HUGETLBFS_MAGIC };
/** The root directory a fresh mount of these filesystems has (Linux defaults). */
const ROOT_OF: Record<string, { mode: number; size: number }> = {
  tmpfs: { mode: 0o1777, size: 40 },
  hugetlbfs: { mode: 0o755, size: 0 },
};

export interface PlanFsOptions {
  /** The mount table, as the plan's mounter holds it now. */
  mounts: () => readonly MountInfo[];
  /** The daemon's umask (open(2) and mkdir(2) apply it). */
  umask?: number;
  /** Reports each change, with absolute host paths. */
  record: (step: FsStep) => void;
}

export interface PlanFs extends FsOps {
  /**
   * A mount was made at `path`: its host contents are hidden, as the kernel
   * hides them, and the directory is now the new filesystem's root (tmpfs:
   * 1777 root:root unless mode=, uid=, gid= say otherwise; hugetlbfs: 0755).
   */
  mounted(path: string, fsType: string, options: string[]): void;
  /** The mount at `path` went away, and what was written on it with it. */
  unmounted(path: string): void;
  /** What is at `path` now (symlinks not followed); undefined if nothing. */
  entry(
    path: string,
  ):
    | { kind: Kind; mode: number; size: number; uid: number; gid: number; target?: string; data?: Buffer }
    | undefined;
  /** Every path at or below `path`, depth first, sorted. */
  walk(path: string): string[];
}

export function createPlanFs(o: PlanFsOptions): PlanFs {
  const umask = o.umask ?? 0o022;
  let nextIno = 1;
  const fromHost = (parent: Node | undefined, name: string, host: string): Node | undefined => {
    let st: import('node:fs').Stats;
    try {
      st = lstatSync(host);
    } catch {
      return undefined;
    }
    const kind = kindOf(st);
    const node: Node = {
      kind,
      ino: nextIno++,
      perm: st.mode & 0o7777,
      uid: st.uid,
      gid: st.gid,
      parent,
      name,
      host,
      size: st.size,
    };
    if (kind === 'symlink') node.target = readlinkSync(host);
    if (kind === 'dir') {
      node.children = new Map();
      node.gone = new Set();
    }
    return node;
  };
  const hostRoot = fromHost(undefined, '', '/');
  if (!hostRoot) throw new Error('cannot lstat / on this host');
  const root: Node = hostRoot;
  const fds = new Map<number, { node: Node; write: boolean; path: string }>();
  let nextFd = 1000;

  const pathOf = (n: Node): string => {
    const parts: string[] = [];
    for (let c: Node | undefined = n; c?.parent; c = c.parent) parts.unshift(c.name);
    return `/${parts.join('/')}`;
  };

  const childOf = (dir: Node, name: string): Node | undefined => {
    const known = dir.children?.get(name);
    if (known) return known;
    if (dir.complete || dir.gone?.has(name) || dir.host === undefined) return undefined;
    const n = fromHost(dir, name, posix.join(dir.host, name));
    if (n) dir.children?.set(name, n);
    else dir.gone?.add(name);
    return n;
  };

  const names = (dir: Node): string[] => {
    if (!dir.complete && dir.host !== undefined) {
      let hostNames: string[] = [];
      try {
        hostNames = readdirSync(dir.host);
      } catch {
        // unreadable on the host: what the plan made is all there is
      }
      for (const n of hostNames) childOf(dir, n);
      dir.complete = true;
    }
    return [...(dir.children?.keys() ?? [])];
  };

  /**
   * Resolves `path` as the kernel does: `/proc/self/fd/<n>` starts at an open
   * fd, every symlink but the last component's is followed (the last one's
   * only when `follow`). Returns the parent and the last name too, so creating
   * calls can work on a missing entry.
   */
  function lookup(
    path: string,
    follow: boolean,
    syscall: string,
  ): { parent: Node; name: string; node: Node | undefined } {
    let start = root;
    let rest = path;
    const fdPath = /^\/proc\/self\/fd\/(\d+)(\/.*)?$/.exec(path);
    if (fdPath) {
      const fd = fds.get(Number(fdPath[1]));
      if (!fd) throw fsError('EBADF', syscall, path);
      if (!fdPath[2]) return { parent: fd.node.parent ?? fd.node, name: fd.node.name, node: fd.node };
      start = fd.node;
      rest = fdPath[2];
    }
    let hops = 0;
    const walkFrom = (
      from: Node,
      parts: string[],
      followLast: boolean,
    ): { parent: Node; name: string; node: Node | undefined } => {
      let cur = from;
      for (const [i, part] of parts.entries()) {
        const last = i === parts.length - 1;
        if (part === '..') {
          cur = cur.parent ?? cur;
          if (last) return { parent: cur.parent ?? cur, name: cur.name, node: cur };
          continue;
        }
        if (cur.kind !== 'dir') throw fsError('ENOTDIR', syscall, path);
        const next = childOf(cur, part);
        if (last) {
          if (next?.kind === 'symlink' && followLast) {
            if (++hops > MAX_SYMLINKS) throw fsError('ELOOP', syscall, path);
            const t = next.target ?? '';
            return walkFrom(t.startsWith('/') ? root : cur, split(t), true);
          }
          return { parent: cur, name: part, node: next };
        }
        if (!next) throw fsError('ENOENT', syscall, path);
        if (next.kind === 'symlink') {
          if (++hops > MAX_SYMLINKS) throw fsError('ELOOP', syscall, path);
          const t = next.target ?? '';
          const r = walkFrom(t.startsWith('/') ? root : cur, split(t), true);
          if (!r.node) throw fsError('ENOENT', syscall, path);
          cur = r.node;
          continue;
        }
        cur = next;
      }
      return { parent: cur.parent ?? cur, name: cur.name, node: cur };
    };
    return walkFrom(start, split(rest), follow);
  }

  const split = (p: string) => p.split('/').filter((x) => x !== '' && x !== '.');

  const existing = (path: string, follow: boolean, syscall: string): Node => {
    const { node } = lookup(path, follow, syscall);
    if (!node) throw fsError('ENOENT', syscall, path);
    return node;
  };

  const mountOf = (n: Node) => mountContaining(o.mounts(), pathOf(n));

  const statOf = (n: Node): FsStats => ({
    dev: mountOf(n)?.minor ?? 0,
    ino: n.ino,
    mode: TYPE_BITS[n.kind] | n.perm,
    size:
      n.kind === 'file'
        ? (n.data?.length ?? n.size)
        : n.kind === 'symlink'
          ? (n.target ?? '').length
          : n.size,
    uid: n.uid,
    gid: n.gid,
    isDirectory: () => n.kind === 'dir',
    isFile: () => n.kind === 'file',
    isSymbolicLink: () => n.kind === 'symlink',
    isSocket: () => n.kind === 'socket',
    isBlockDevice: () => n.kind === 'block',
    isCharacterDevice: () => n.kind === 'char',
  });

  const add = (
    parent: Node,
    name: string,
    n: Omit<Node, 'ino' | 'parent' | 'name' | 'uid' | 'gid'>,
  ): Node => {
    // In a setgid directory new entries take its group, and new directories its setgid bit (Linux).
    const setgid = (parent.perm & 0o2000) !== 0;
    const node: Node = {
      ...n,
      perm: setgid && n.kind === 'dir' ? n.perm | 0o2000 : n.perm,
      ino: nextIno++,
      parent,
      name,
      uid: process.getuid?.() ?? 0,
      gid: setgid ? parent.gid : (process.getgid?.() ?? 0),
    };
    parent.children?.set(name, node);
    parent.gone?.delete(name);
    return node;
  };

  const detach = (parent: Node, name: string) => {
    parent.children?.delete(name);
    parent.gone?.add(name);
  };

  const isMountPoint = (n: Node) => o.mounts().some((m) => m.mountPoint === pathOf(n));

  const contents = (n: Node): Buffer => {
    if (n.data) return n.data;
    if (n.host !== undefined) n.data = readFileSync(n.host);
    return n.data ?? Buffer.alloc(0);
  };

  const handle = (node: Node, write: boolean, path: string): FsHandle => {
    const fd = nextFd++;
    fds.set(fd, { node, write, path });
    return {
      fd,
      stat: async () => statOf(node),
      chmod: async (mode) => {
        node.perm = mode & 0o7777;
        if (!write) o.record({ action: 'chmod', path: pathOf(node), mode: node.perm });
      },
      chown: async (uid, gid) => {
        if (uid !== -1) node.uid = uid;
        if (gid !== -1) node.gid = gid;
        o.record({ action: 'chown', path: pathOf(node), uid, gid });
      },
      writeFile: async (data) => {
        node.data = Buffer.from(data);
        node.size = node.data.length;
      },
      close: async () => {
        if (!fds.delete(fd)) return;
        // A file is reported once, with what it holds when it is closed.
        if (write) o.record({ action: 'write', path: pathOf(node), mode: node.perm, data: contents(node) });
      },
    };
  };

  const ops: PlanFs = {
    async open(path, flags, mode = 0o666) {
      const follow = (flags & O_NOFOLLOW) === 0;
      const { parent, name, node } = lookup(path, follow, 'open');
      if (flags & O_PATH) {
        if (!node) throw fsError('ENOENT', 'open', path);
        return handle(node, false, path);
      }
      if (node?.kind === 'symlink') throw fsError('ELOOP', 'open', path);
      if (flags & O_DIRECTORY) {
        if (!node) throw fsError('ENOENT', 'open', path);
        if (node.kind !== 'dir') throw fsError('ENOTDIR', 'open', path);
        return handle(node, false, path);
      }
      const write = (flags & O_WRONLY) !== 0;
      if (!node) {
        if (!(flags & O_CREAT)) throw fsError('ENOENT', 'open', path);
        if (parent.kind !== 'dir') throw fsError('ENOTDIR', 'open', path);
        const created = add(parent, name, {
          kind: 'file',
          perm: mode & ~umask & 0o7777,
          size: 0,
          data: Buffer.alloc(0),
        });
        return handle(created, true, path);
      }
      if (node.kind === 'dir' && write) throw fsError('EISDIR', 'open', path);
      if (write && flags & O_TRUNC) {
        node.data = Buffer.alloc(0);
        node.size = 0;
      } else if (write) contents(node);
      return handle(node, write, path);
    },
    async mountIdOf(fd) {
      const f = fds.get(fd);
      if (!f) throw fsError('EBADF', 'fdinfo', String(fd));
      return mountOf(f.node)?.id ?? 0;
    },
    lstat: async (path) => statOf(existing(path, false, 'lstat')),
    realpath: async (path) => pathOf(existing(path, true, 'realpath')),
    async lstatBig(path) {
      const n = existing(path, false, 'lstat');
      const st = statOf(n);
      // What the plan cannot know (hard links, blocks allocated) as a fresh filesystem would have it.
      return {
        dev: BigInt(st.dev),
        ino: BigInt(st.ino),
        nlink: 1n,
        blocks: BigInt(Math.ceil(st.size / 4096) * 8),
        isDirectory: st.isDirectory,
      };
    },
    stat: async (path) => statOf(existing(path, true, 'stat')),
    async access(path) {
      existing(path, true, 'access');
    },
    async statfsType(path) {
      const m = mountOf(existing(path, true, 'statfs'));
      return MAGIC[m?.fsType ?? ''] ?? EXT4_MAGIC;
    },
    async readdir(path) {
      const n = existing(path, true, 'scandir');
      if (n.kind !== 'dir') throw fsError('ENOTDIR', 'scandir', path);
      return names(n);
    },
    readdirSome: async (path, max) => (await ops.readdir(path)).slice(0, max),
    async readFile(path) {
      const n = existing(path, true, 'open');
      if (n.kind === 'dir') throw fsError('EISDIR', 'read', path);
      return Buffer.from(contents(n));
    },
    async readlink(path) {
      const n = existing(path, false, 'readlink');
      if (n.kind !== 'symlink') throw fsError('EINVAL', 'readlink', path);
      return n.target ?? '';
    },
    async mkdir(path, mode) {
      const { parent, name, node } = lookup(path, false, 'mkdir');
      if (node) throw fsError('EEXIST', 'mkdir', path);
      if (parent.kind !== 'dir') throw fsError('ENOTDIR', 'mkdir', path);
      const n = add(parent, name, {
        kind: 'dir',
        perm: mode & ~umask & 0o777,
        size: 4096,
        children: new Map(),
        gone: new Set(),
        complete: true,
      });
      o.record({ action: 'mkdir', path: pathOf(n), mode: n.perm });
    },
    async symlink(target, path) {
      const { parent, name, node } = lookup(path, false, 'symlink');
      if (node) throw fsError('EEXIST', 'symlink', path);
      const n = add(parent, name, { kind: 'symlink', perm: 0o777, size: 0, target });
      o.record({ action: 'symlink', path: pathOf(n), target });
    },
    async rename(from, to) {
      const a = lookup(from, false, 'rename');
      if (!a.node) throw fsError('ENOENT', 'rename', from);
      const b = lookup(to, false, 'rename');
      if (b.node?.kind === 'dir' && a.node.kind !== 'dir') throw fsError('EISDIR', 'rename', to);
      if (b.node?.kind === 'dir' && names(b.node).length > 0) throw fsError('ENOTEMPTY', 'rename', to);
      const was = pathOf(a.node);
      detach(a.parent, a.name);
      a.node.parent = b.parent;
      a.node.name = b.name;
      b.parent.children?.set(b.name, a.node);
      b.parent.gone?.delete(b.name);
      o.record({ action: 'rename', path: was, to: pathOf(a.node) });
    },
    async unlink(path) {
      const { parent, name, node } = lookup(path, false, 'unlink');
      if (!node) throw fsError('ENOENT', 'unlink', path);
      if (node.kind === 'dir') throw fsError('EISDIR', 'unlink', path);
      const was = pathOf(node);
      detach(parent, name);
      o.record({ action: 'rm', path: was });
    },
    async rmdir(path) {
      const { parent, name, node } = lookup(path, false, 'rmdir');
      if (!node) throw fsError('ENOENT', 'rmdir', path);
      if (node.kind !== 'dir') throw fsError('ENOTDIR', 'rmdir', path);
      if (isMountPoint(node)) throw fsError('EBUSY', 'rmdir', path);
      if (names(node).length > 0) throw fsError('ENOTEMPTY', 'rmdir', path);
      const was = pathOf(node);
      detach(parent, name);
      o.record({ action: 'rm', path: was });
    },
    async chmod(path, mode) {
      const n = existing(path, true, 'chmod');
      n.perm = mode & 0o7777;
      o.record({ action: 'chmod', path: pathOf(n), mode: n.perm });
    },
    async chown(path, uid, gid) {
      const n = existing(path, true, 'chown');
      if (uid !== -1) n.uid = uid;
      if (gid !== -1) n.gid = gid;
      o.record({ action: 'chown', path: pathOf(n), uid, gid });
    },
    async lchown(path, uid, gid) {
      const n = existing(path, false, 'lchown');
      if (uid !== -1) n.uid = uid;
      if (gid !== -1) n.gid = gid;
      o.record({ action: 'chown', path: pathOf(n), uid, gid });
    },
    mounted(path, fsType, options) {
      const n = existing(path, true, 'mount');
      n.children = new Map();
      n.gone = new Set();
      n.complete = true;
      n.host = undefined;
      const root = ROOT_OF[fsType];
      if (!root) return;
      const opt = (name: string) => options.find((x) => x.startsWith(`${name}=`))?.slice(name.length + 1);
      n.perm = opt('mode') !== undefined ? Number.parseInt(opt('mode') ?? '', 8) & 0o7777 : root.mode;
      n.uid = Number(opt('uid') ?? 0);
      n.gid = Number(opt('gid') ?? 0);
      n.size = root.size;
    },
    unmounted(path) {
      const n = lookup(path, true, 'umount').node;
      if (!n) return;
      // The plan only mounts on directories it made or found empty: nothing is below once it is gone.
      n.children = new Map();
      n.complete = true;
    },
    entry(path) {
      let n: Node | undefined;
      try {
        n = lookup(path, false, 'lstat').node;
      } catch {
        return undefined;
      }
      if (!n) return undefined;
      const st = statOf(n);
      const data = n.kind === 'file' ? contents(n) : undefined;
      return { kind: n.kind, mode: n.perm, size: st.size, uid: n.uid, gid: n.gid, target: n.target, data };
    },
    walk(path) {
      const out: string[] = [];
      const visit = (p: string) => {
        const n = lookup(p, false, 'lstat').node;
        if (!n) return;
        out.push(p);
        if (n.kind === 'dir') for (const c of names(n).sort()) visit(posix.join(p, c));
      };
      visit(path);
      return out;
    },
  };
  return ops;
}
