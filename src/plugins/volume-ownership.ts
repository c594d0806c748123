// kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go): give the pod's
// fsGroup group ownership of everything in the volume, make it group-rw (ro:
// group-r), and set setgid on directories so new files inherit the group.
//
// fsGroupChangePolicy OnRootMismatch skips the walk when the volume root
// already has the group, the group bits and setgid. kubelet honours the policy
// only where a plugin passes it (CSI under its fsGroupPolicy, local volumes);
// emptyDir and the atomic-writer volumes always pass none and are walked.

import type { Stats } from 'node:fs';
import { chmod, lchown, lstat, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

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
): Promise<boolean> {
  let st: Stats;
  try {
    st = await stat(dir);
  } catch {
    return true;
  }
  if (st.gid !== fsGroup) return true;
  if (!st.isDirectory()) return true;
  const need = (readOnly ? roMask : rwMask) | execMask;
  return (st.mode & need) !== need || (st.mode & setgid) === 0;
}

/** changeFilePermission: Lchown(-1, gid), then chmod unless a symlink. Errors are ignored, as kubelet only logs them. */
async function changeFilePermission(
  path: string,
  st: Stats,
  fsGroup: number,
  readOnly: boolean,
): Promise<void> {
  await lchown(path, -1, fsGroup).catch(() => {});
  if (st.isSymbolicLink()) return;
  let mode = (st.mode & 0o7777) | (readOnly ? roMask : rwMask);
  if (st.isDirectory()) mode |= setgid | execMask;
  await chmod(path, mode).catch(() => {});
}

/**
 * Post-order walk like kubelet's walkDeep: unsorted, never follows symlinks,
 * children before their directory. Walk errors (readdir, lstat) are returned.
 * The non-directory entries of a directory are handled WALK_CONCURRENCY at a
 * time; subdirectories one after another, so at most WALK_CONCURRENCY
 * operations are in flight however deep the tree is.
 */
async function walkDeep(
  path: string,
  st: Stats,
  visit: (path: string, st: Stats) => Promise<void>,
): Promise<void> {
  if (st.isDirectory()) {
    const names = await readdir(path);
    const subdirs: [string, Stats][] = [];
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const child = join(path, names[next++]);
        const childStat = await lstat(child);
        if (childStat.isDirectory()) subdirs.push([child, childStat]);
        else await visit(child, childStat);
      }
    };
    await Promise.all(Array.from({ length: Math.min(WALK_CONCURRENCY, names.length) }, worker));
    for (const [child, childStat] of subdirs) await walkDeep(child, childStat, visit);
  }
  await visit(path, st);
}

export async function setVolumeOwnership(
  dir: string,
  fsGroup: number,
  opts: VolumeOwnershipOptions,
): Promise<VolumeOwnershipResult> {
  if (
    opts.fsGroupChangePolicy === 'OnRootMismatch' &&
    !(await requiresPermissionChange(dir, fsGroup, opts.readOnly))
  )
    return { skipped: true, files: 0 };
  let files = 0;
  await walkDeep(dir, await lstat(dir), async (path, st) => {
    files++;
    await changeFilePermission(path, st, fsGroup, opts.readOnly);
  });
  return { skipped: false, files };
}
