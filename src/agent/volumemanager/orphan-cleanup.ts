// kubelet's cleanupOrphanedPodDirs (kubelet_volumes.go): pod directories and
// records of pods nobody wants any more are removed, never across a mount and
// never through a symlink.

import { errorMessage } from '../../errno.ts';
import {
  podDir,
  podsDir,
  podVolumeRecordsDir,
  podVolumeRecordsRoot,
  podVolumesDir,
  unescapeQualifiedName,
} from '../../volumehost/paths.ts';
import { mountPointsBelow, mountPointsIn, relativeBeneath } from '../../volumehost/safe-fs.ts';
import { reasonOf } from '../../volumehost/volume.ts';
import { podHasVolumes, type VolumeManagerContext } from './context.ts';
import { readdirOrEmpty, reconstructVolume } from './reconstruction.ts';
import { podOwned } from './records.ts';

/**
 * Removes a pod's directory and its records once the mount table shows no
 * mount below it (through directory fds: no symlink in it is followed, no
 * mount entered, by mnt_id). Returns the mount points that stopped it.
 * `table`: the mount table, when the caller read it once for many pods.
 */
export async function removePodDirUnlessMounted(
  ctx: Pick<VolumeManagerContext, 'rootDir' | 'mounter' | 'host'>,
  uid: string,
  table?: readonly { mountPoint: string }[],
): Promise<string[]> {
  const { rootDir, mounter } = ctx;
  const dir = podDir(rootDir, uid);
  const mounts = table ? mountPointsIn(table, dir) : await mountPointsBelow(mounter, dir);
  if (mounts.length > 0) return mounts;
  const fs = ctx.host.getFs();
  await fs.removeAllBeneath(rootDir, relativeBeneath(rootDir, dir));
  await fs.removeAllBeneath(rootDir, relativeBeneath(rootDir, podVolumeRecordsDir(rootDir, uid)));
  return [];
}

/**
 * kubelet's cleanupOrphanedPodDirs, without its worst failure mode: a pod
 * directory with no mount below it is removed even if files remain, because
 * the mount table (not a guess) says nothing mounted would be deleted.
 */
export async function cleanupOrphanedPodDirs(
  ctx: VolumeManagerContext,
  housekeepingErrors: Map<string, string>,
): Promise<void> {
  const { rootDir, logger, dsw, mounter } = ctx;
  const podDirs = new Set(await readdirOrEmpty(ctx, podsDir(rootDir)));
  for (const uid of await readdirOrEmpty(ctx, podVolumeRecordsRoot(rootDir))) {
    // Records never hold a mount; once their pod directory is gone they describe nothing.
    if (!podDirs.has(uid) && !dsw.pod(uid) && !podHasVolumes(ctx, uid)) {
      await ctx.host
        .getFs()
        .removeAllBeneath(rootDir, relativeBeneath(rootDir, podVolumeRecordsDir(rootDir, uid)));
    }
  }
  const orphans: string[] = [];
  for (const uid of await readdirOrEmpty(ctx, podsDir(rootDir))) {
    if (dsw.pod(uid) || podHasVolumes(ctx, uid)) {
      housekeepingErrors.delete(uid);
      continue;
    }
    orphans.push(uid);
  }
  if (orphans.length === 0) return;
  // One read of the mount table for every orphan, not one each (a teardown of 300 pods removes 300
  // directories). Read after the orphans are known: none has an operation running, and none can get
  // one while this pass runs (only the reconciler starts them), so the table is current for each.
  let table: Awaited<ReturnType<typeof mounter.list>>;
  try {
    table = await mounter.list();
  } catch (err) {
    for (const uid of orphans) housekeepingErrors.set(uid, errorMessage(err));
    logger.warn(
      { err: errorMessage(err) },
      'could not read the mount table to remove orphaned pod directories',
    );
    return;
  }
  for (const uid of orphans) {
    if (!(await podOwned(ctx.host.getFs(), rootDir, uid))) {
      const msg = 'pod directory not created or adopted by podvol (no record under podvol/pods): left alone';
      if (housekeepingErrors.get(uid) !== msg) logger.warn({ podUID: uid }, msg);
      housekeepingErrors.set(uid, msg);
      continue;
    }
    try {
      const mounts = await removePodDirUnlessMounted(ctx, uid, table);
      if (mounts.length === 0) {
        housekeepingErrors.delete(uid);
        logger.info({ podUID: uid }, 'removed orphaned pod directory');
        continue;
      }
      // Mounted volumes nobody knows about (a crash before the record was written,
      // or a volume added behind our back): adopt them so the reconciler tears them down.
      const volumesDir = `${podVolumesDir(rootDir, uid)}/`;
      let adopted = 0;
      for (const mp of mounts) {
        const rest = mp.startsWith(volumesDir) ? mp.slice(volumesDir.length).split('/') : [];
        const [plugin, volume] = rest;
        if (rest.length !== 2 || plugin === undefined || volume === undefined) continue;
        await reconstructVolume(ctx, uid, unescapeQualifiedName(plugin), volume);
        adopted++;
      }
      if (adopted < mounts.length) {
        const msg = `orphaned pod directory still has mounts podvol cannot attribute to a volume: ${mounts.join(', ')}`;
        housekeepingErrors.set(uid, msg);
        ctx.metrics.operationError('orphan_cleanup', 'MountsRemain');
        logger.warn({ podUID: uid }, msg);
      }
    } catch (err) {
      housekeepingErrors.set(uid, errorMessage(err));
      ctx.metrics.operationError('orphan_cleanup', reasonOf(err, 'CleanupFailed'));
      logger.warn({ podUID: uid, err: errorMessage(err) }, 'could not remove orphaned pod directory');
    }
  }
}
