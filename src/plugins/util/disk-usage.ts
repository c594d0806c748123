// kubelet's fs.DiskUsage (pkg/volume/util/fs) without project quotas: the bytes
// and inodes a directory tree uses, as `du -x` counts them: allocated blocks
// (st_blocks * 512) of every entry on the root's filesystem, hard links counted
// once, never following a symlink or descending into another mount.
import type { BigIntStats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export interface UsageInfo {
  bytes: bigint;
  inodes: number;
}

/** Entries of one directory looked at concurrently (the walk is async; this bounds it). */
const CONCURRENCY = 8;

const gone = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

export async function diskUsage(root: string): Promise<UsageInfo> {
  const top = await lstat(root, { bigint: true });
  const usage: UsageInfo = { bytes: 0n, inodes: 0 };
  const seen = new Set<bigint>();
  const count = (st: BigIntStats) => {
    if (st.nlink > 1n) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    usage.bytes += st.blocks * 512n;
    usage.inodes++;
  };
  const walk = async (dir: string, st: BigIntStats): Promise<void> => {
    count(st);
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      // Deleted after its parent was read: kubelet ignores it too.
      if (gone(err)) return;
      throw new Error(`unable to count inodes for ${dir}: ${(err as Error).message}`);
    }
    const subdirs: [string, BigIntStats][] = [];
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const path = join(dir, names[next++]);
        let child: BigIntStats;
        try {
          child = await lstat(path, { bigint: true });
        } catch (err) {
          if (gone(err)) continue;
          throw new Error(`unable to count inodes for ${path}: ${(err as Error).message}`);
        }
        // Don't descend into (or count) anything on another device: a mount below the volume.
        if (child.dev !== top.dev) continue;
        if (child.isDirectory()) subdirs.push([path, child]);
        else count(child);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, names.length) }, worker));
    for (const [path, child] of subdirs) await walk(path, child);
  };
  await walk(root, top);
  return usage;
}
