// kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go): give the pod's
// fsGroup group ownership of everything in the volume, make it group-rw (ro:
// group-r), and set setgid on directories so new files inherit the group.
//
// fsGroupChangePolicy OnRootMismatch skips the walk when the volume root
// already has the group, the group bits and setgid. kubelet honours the policy
// only where a plugin passes it (CSI under its fsGroupPolicy, local volumes);
// emptyDir and the atomic-writer volumes always pass none and are walked.

import type { FsOps, FsStats } from '../volumehost/fs.ts';
import type { SafeDir } from '../volumehost/safe-fs.ts';

const rwMask = 0o660;
const roMask = 0o440;
const execMask = 0o110;
const setgid = 0o2000;

/** Entries of one directory handled at once: enough to keep libuv's threads busy, few enough to bound memory. */
const WALK_CONCURRENCY = 8;

export interface VolumeOwnershipOptions {
  /** The volume is read-only to containers: group-read instead of group-rw. */
  readOnly: boolean;
  /** The pod's fsGroupChangePolicy, for the plugins that honour it. */
  fsGroupChangePolicy?: string;
}

export interface VolumeOwnershipResult {
  /** OnRootMismatch found the root right and nothing was walked. */
  skipped: boolean;
  /** Entries chowned and chmodded (the root included). */
  files: number;
}

/**
 * kubelet's requiresPermissionChange: the root (followed, as os.Stat does) must
 * be a directory with group fsGroup, the group bits of rw (ro) plus exec, and setgid.
 */
export async function requiresPermissionChange(
  dir: string,
  fsGroup: number,
  readOnly: boolean,
  fs: Pick<FsOps, 'stat'>,
): Promise<boolean> {
  let st: FsStats;
  try {
    st = await fs.stat(dir);
  } catch {
    return true;
  }
  if (st.gid !== fsGroup) return true;
  if (!st.isDirectory()) return true;
  const need = (readOnly ? roMask : rwMask) | execMask;
  return (st.mode & need) !== need || (st.mode & setgid) === 0;
}

/** The mode changeFilePermission gives an entry: group rw (ro), plus exec and setgid on directories. */
const newMode = (readOnly: boolean) => (st: FsStats) => {
  let mode = (st.mode & 0o7777) | (readOnly ? roMask : rwMask);
  if (st.isDirectory()) mode |= setgid | execMask;
  return mode;
};

/**
 * Post-order walk like kubelet's walkDeep: unsorted, never follows symlinks,
 * children before their directory. It goes through directory fds, and every
 * chown/chmod acts on the inode that was lstat'ed (SafeDir.chownChmodChild), so
 * a container swapping a symlink into its emptyDir meanwhile cannot redirect
 * it. Walk errors (readdir) are returned. The non-directory entries of a
 * directory are handled WALK_CONCURRENCY at a time; subdirectories one after
 * another, so at most WALK_CONCURRENCY operations are in flight however deep
 * the tree is.
 */
async function walkDeep(
  dir: SafeDir,
  visit: (parent: SafeDir, name: string) => Promise<void>,
): Promise<void> {
  const names = await dir.fs.readdir(dir.procPath);
  const subdirs: string[] = [];
  let next = 0;
  const worker = async () => {
    for (let name = names[next++]; name !== undefined; name = names[next++]) {
      const st = await dir.fs.lstat(dir.child(name)).catch(() => undefined);
      if (st?.isDirectory()) subdirs.push(name);
      else await visit(dir, name);
    }
  };
  await Promise.all(Array.from({ length: Math.min(WALK_CONCURRENCY, names.length) }, worker));
  // One open subdirectory at a time (fds stay bounded by the depth).
  for (const name of subdirs) {
    let child: SafeDir | undefined;
    try {
      // Nested mounts are walked, as filepath.Walk does; a symlink swapped in since the lstat is not entered.
      child = await dir.openChild(name, true);
    } catch {
      // gone or swapped: handled as an entry below
    }
    if (child) {
      try {
        await walkDeep(child, visit);
      } finally {
        await child.close();
      }
    }
    await visit(dir, name);
  }
}

export async function setVolumeOwnership(
  root: SafeDir,
  fsGroup: number,
  opts: VolumeOwnershipOptions,
): Promise<VolumeOwnershipResult> {
  // Every caller passes the volume it opened through its operation's fs: the walk never leaves it.
  if (
    opts.fsGroupChangePolicy === 'OnRootMismatch' &&
    !(await requiresPermissionChange(root.procPath, fsGroup, opts.readOnly, root.fs))
  )
    return { skipped: true, files: 0 };
  const mode = newMode(opts.readOnly);
  let files = 0;
  await walkDeep(root, async (parent, name) => {
    files++;
    await parent.chownChmodChild(name, fsGroup, mode);
  });
  files++;
  await root.chown(-1, fsGroup).catch(() => {});
  await root.chmod(mode(await root.stat())).catch(() => {});
  return { skipped: false, files };
}
