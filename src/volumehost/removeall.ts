// Deleting a pod's directories must never reach into a mounted filesystem:
// an st_dev comparison misses bind mounts of the same filesystem, so the mount
// table is consulted instead, and any mount at or below `path` stops the removal.
import { rm } from 'node:fs/promises';
import { resolve, sep } from 'node:path';
import type * as mount from '../mount/types.ts';

export class MountedBelowError extends Error {
  readonly mountPoints: string[];
  constructor(path: string, mountPoints: string[]) {
    super(
      `refusing to remove ${path}: ${mountPoints.length} mount point(s) below it (${mountPoints.slice(0, 3).join(', ')})`,
    );
    this.name = 'MountedBelowError';
    this.mountPoints = mountPoints;
  }
}

export async function mountPointsBelow(mounter: mount.Interface, path: string): Promise<string[]> {
  const root = resolve(path);
  const table = await mounter.list();
  return table.map((m) => m.mountPoint).filter((mp) => mp === root || mp.startsWith(root + sep));
}

/** rm -r that refuses to cross a mount boundary; a missing path is success. */
export async function removeAllOneFilesystem(mounter: mount.Interface, path: string): Promise<void> {
  const below = await mountPointsBelow(mounter, path);
  if (below.length > 0) throw new MountedBelowError(path, below);
  await rm(path, { recursive: true, force: true });
}
