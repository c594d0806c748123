// kubelet's fs.DiskUsage (pkg/volume/util/fs) without project quotas: the bytes
// and inodes a directory tree uses, as `du -x` counts them: allocated blocks
// (st_blocks * 512) of every entry on the root's filesystem, hard links counted
// once, never following a symlink or descending into another mount. The walk
// goes through directory fds (safe-fs), so a container swapping a symlink in
// for a directory it owns cannot send the walk elsewhere on the host.
import { errnoCode, errorMessage } from '../../errno.ts';
import type { FsBigStats } from '../../volumehost/fs.ts';
import type { SafeDir, SafeFs } from '../../volumehost/safe-fs.ts';

export interface UsageInfo {
  bytes: bigint;
  inodes: number;
}

/** Entries of one directory looked at concurrently (the walk is async; this bounds it). */
const CONCURRENCY = 8;

const gone = (err: unknown) => {
  const code = errnoCode(err);
  return code === 'ENOENT' || code === 'ENOTDIR';
};

/** The usage of the tree at `root`, read through `fs` (the volume host's, VolumeHost.getFs). */
export async function diskUsage(fs: SafeFs, root: string): Promise<UsageInfo> {
  const usage: UsageInfo = { bytes: 0n, inodes: 0 };
  const seen = new Set<bigint>();
  const count = (st: FsBigStats) => {
    if (st.nlink > 1n) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    usage.bytes += st.blocks * 512n;
    usage.inodes++;
  };
  // `<procPath>/.`: the open directory itself (the magic link is followed
  // to it and `.` is its own entry), where an lstat of the bare /proc/self/fd/<n> is the link.
  const self = (dir: SafeDir) => fs.ops.lstatBig(`${dir.procPath}/.`);
  const top = await fs.openRoot(root);
  try {
    const dev = (await self(top)).dev;
    const walk = async (dir: SafeDir): Promise<void> => {
      count(await self(dir));
      const names = await dir.fs.readdir(dir.procPath);
      const subdirs: string[] = [];
      let next = 0;
      const worker = async () => {
        for (let name = names[next++]; name !== undefined; name = names[next++]) {
          let st: FsBigStats;
          try {
            st = await dir.fs.lstatBig(dir.child(name));
          } catch (err) {
            // Deleted after its parent was read: kubelet ignores it too.
            if (gone(err)) continue;
            throw new Error(`unable to count inodes for ${dir.path}/${name}: ${errorMessage(err)}`);
          }
          if (st.dev !== dev) continue; // another filesystem mounted below: not counted, not entered
          if (st.isDirectory()) subdirs.push(name);
          else count(st);
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, names.length) }, worker));
      // One open subdirectory at a time: fds stay bounded by the depth.
      for (const name of subdirs) {
        let child: SafeDir;
        try {
          child = await dir.openChild(name);
        } catch {
          continue; // gone, swapped for a symlink, or a mount point: not counted
        }
        try {
          await walk(child);
        } finally {
          await child.close();
        }
      }
    };
    await walk(top);
  } finally {
    await top.close();
  }
  return usage;
}
