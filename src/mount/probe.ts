// Small host probes the volume plugins need next to the mounter.
import { access, stat, statfs } from 'node:fs/promises';
import { release } from 'node:os';
import { isCorruptedMountError, isNotExistError, MountError } from './errors.ts';
import type { Interface } from './types.ts';

/** statfs f_type of tmpfs (linux/magic.h TMPFS_MAGIC). */
export const TMPFS_MAGIC = 0x01021994;
/** statfs f_type of hugetlbfs (linux/magic.h HUGETLBFS_MAGIC). */
export const HUGETLBFS_MAGIC = 0x958458f6;

export interface PathState {
  exists: boolean;
  /** Something is there but broken: a corrupted mount, or a stale handle. */
  corrupted: boolean;
  /** The errno error behind `corrupted`. */
  error?: NodeJS.ErrnoException;
}

export interface PathProbeFs {
  stat(path: string): Promise<unknown>;
  access(path: string): Promise<void>;
}

const realFs: PathProbeFs = { stat, access };

/**
 * mount-utils PathExists: stat succeeds → exists; ENOENT → missing, unless
 * access(F_OK) still succeeds (a stale handle); a corrupted-mount errno →
 * exists but corrupted. Any other error is thrown.
 */
export async function pathExists(path: string, fs: PathProbeFs = realFs): Promise<PathState> {
  try {
    await fs.stat(path);
    return { exists: true, corrupted: false };
  } catch (err) {
    if (isNotExistError(err)) {
      try {
        await fs.access(path);
      } catch {
        return { exists: false, corrupted: false };
      }
      const stale: NodeJS.ErrnoException = new Error(`potential stale file handle at ${path}`);
      stale.code = 'ESTALE';
      return { exists: true, corrupted: true, error: stale };
    }
    if (isCorruptedMountError(err))
      return { exists: true, corrupted: true, error: err instanceof Error ? err : new Error(String(err)) };
    throw err;
  }
}

/** The filesystem type number (statfs f_type) of the filesystem holding `path`. */
export async function statfsType(path: string): Promise<number> {
  return (await statfs(path)).type;
}

/** tmpfs learned `noswap` in Linux 6.4. */
export function kernelSupportsTmpfsNoswap(kernelRelease: string = release()): boolean {
  const m = /^(\d+)\.(\d+)/.exec(kernelRelease);
  if (!m) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 6 || (major === 6 && minor >= 4);
}

export interface NoswapProbe {
  /** Kernel release to judge by; default os.release(). */
  kernelRelease?: string;
  /** When the version says no (or is unparseable), try a real `mount -t tmpfs -o noswap` on this empty directory. */
  probe?: { mounter: Interface; dir: string };
}

/**
 * Whether emptyDir may add `noswap` to tmpfs mounts. Decided by the kernel
 * version, or (for backports) by really mounting when a probe is given.
 * Callers cache the answer; it does not change while the host runs.
 */
export async function tmpfsNoswapSupported(opts: NoswapProbe = {}): Promise<boolean> {
  if (kernelSupportsTmpfsNoswap(opts.kernelRelease)) return true;
  if (!opts.probe) return false;
  const { mounter, dir } = opts.probe;
  try {
    await mounter.mount('tmpfs', dir, 'tmpfs', ['noswap', 'size=1m'], { withoutSystemd: true });
  } catch (err) {
    if (err instanceof MountError) return false;
    throw err;
  }
  await mounter.unmount(dir);
  return true;
}
