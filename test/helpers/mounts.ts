// This process's mount table for tests and benches, read with src's own
// mountinfo parser (escapes decoded, `(deleted)` handled) instead of splitting
// lines by hand. No node:test here: benches import it too.
import { readFileSync } from 'node:fs';
import { isMountPointIn, PROC_MOUNTINFO, parseMountInfo, readMountInfo } from '../../src/mount/mountinfo.ts';
import type { MountInfo } from '../../src/mount/types.ts';

/** Is `path` strictly below `dir`? (Everything but `/` is below `/`.) */
export function isBelow(path: string, dir: string): boolean {
  return path !== dir && path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** The mount table now, read synchronously (for cleanups that must finish before anything else runs). */
export function mountTable(): MountInfo[] {
  return parseMountInfo(readFileSync(PROC_MOUNTINFO, 'utf8'));
}

/** Mounts strictly below `dir`, in mount order (read until two reads agree: other tests mount meanwhile). */
export async function mountsBelow(dir: string): Promise<MountInfo[]> {
  return (await readMountInfo()).filter((m) => isBelow(m.mountPoint, dir));
}

/** Is `dir` a mount point now? */
export async function mountedAt(dir: string): Promise<boolean> {
  return isMountPointIn(await readMountInfo(), dir);
}

/** Mount points at or below `dir` in `table`, the latest (so the deepest) first: the order to unmount them in. */
export function mountPointsAtOrBelow(dir: string, table: readonly MountInfo[] = mountTable()): string[] {
  return table
    .map((m) => m.mountPoint)
    .filter((mp) => mp === dir || isBelow(mp, dir))
    .reverse();
}
