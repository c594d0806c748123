// mount-utils' CleanupMountPoint and CleanupMountWithForce
// (mount_helper_common.go): free functions over mount.Interface, so that every
// mounter — the Linux one, the fake, plan's recording one — is cleaned up by
// the same rule instead of each carrying its own copy.
import { access, rmdir, stat, unlink } from 'node:fs/promises';
import { errnoCode } from '../errno.ts';
import { type Logger, silentLogger } from '../logger.ts';
import { type PathProbeFs, pathExists } from './probe.ts';
import type { Interface, UnmountOutcome } from './types.ts';

/** The file calls a cleanup makes: the probe of mount-utils' PathExists and os.Remove. */
export interface CleanupFs extends PathProbeFs {
  rmdir(path: string): Promise<void>;
  unlink(path: string): Promise<void>;
}

export interface CleanupOptions {
  /**
   * Where the path is probed and removed: the volume host's filesystem (plan's
   * recording one must never reach the real host). Default: the host's.
   */
  fs?: CleanupFs;
  logger?: Logger;
}

const hostFs: CleanupFs = { stat, access, rmdir, unlink };

/**
 * Stacked mounts on one path are unmounted one by one; this bounds the loop.
 * mount-utils unmounts once and fails on a second layer: podvol's own
 * retries would otherwise leave a stacked mount for the next sync.
 */
const MAX_STACKED_UNMOUNTS = 16;

/**
 * mount-utils CleanupMountPoint: unmounts `mountPath` if it is mounted (or a
 * corrupted mount), then removes the directory (or the file of a file bind
 * mount). A missing path is success. Like mount-utils it refuses a path whose
 * probe fails with anything but a corrupted-mount errno, a directory that is
 * not empty (os.Remove), and a path still mounted after unmounting.
 * `extensive` asks isMountPoint (the mount table: bind mounts on the same
 * filesystem) instead of isLikelyNotMountPoint (device numbers).
 */
export function cleanupMountPoint(
  mountPath: string,
  mounter: Interface,
  extensive: boolean,
  opts: CleanupOptions = {},
): Promise<void> {
  return cleanup(mountPath, mounter, extensive, () => mounter.unmount(mountPath), opts);
}

/**
 * mount-utils CleanupMountWithForce: CleanupMountPoint whose unmount is
 * unmountWithForce, for a filesystem that may not answer (`umountTimeoutMs`).
 */
export function cleanupMountWithForce(
  mountPath: string,
  mounter: Interface,
  extensive: boolean,
  umountTimeoutMs: number,
  opts: CleanupOptions = {},
): Promise<void> {
  return cleanup(
    mountPath,
    mounter,
    extensive,
    () => mounter.unmountWithForce(mountPath, umountTimeoutMs),
    opts,
  );
}

async function cleanup(
  path: string,
  mounter: Interface,
  extensive: boolean,
  unmount: () => Promise<UnmountOutcome>,
  { fs = hostFs, logger = silentLogger() }: CleanupOptions,
): Promise<void> {
  const state = await pathExists(path, fs);
  if (!state.exists) {
    logger.debug({ path }, 'cleanup: path does not exist');
    return;
  }
  const notMounted = async () =>
    extensive ? !(await mounter.isMountPoint(path)) : await mounter.isLikelyNotMountPoint(path);

  // A corrupted mount cannot answer either check: it is unmounted without asking.
  if (!state.corrupted && (await notMounted())) {
    logger.warn({ path }, 'cleanup: not a mount point, deleting');
    await remove(path, fs);
    return;
  }
  if (state.corrupted)
    logger.warn({ path, err: String(state.error) }, 'cleanup: corrupted mount, unmounting');
  for (let i = 0; i < MAX_STACKED_UNMOUNTS; i++) {
    await unmount();
    if (await notMounted()) {
      logger.info({ path }, 'cleanup: unmounted, deleting the directory');
      await remove(path, fs);
      return;
    }
  }
  throw new Error(
    `failed to cleanup mount point ${path}: still mounted after ${MAX_STACKED_UNMOUNTS} unmounts`,
  );
}

/** os.Remove: the directory, or the file a file bind mount was on. */
async function remove(path: string, fs: CleanupFs): Promise<void> {
  try {
    await fs.rmdir(path);
  } catch (err) {
    if (errnoCode(err) !== 'ENOTDIR') throw err;
    await fs.unlink(path);
  }
}
