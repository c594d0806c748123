// kubelet's reconstruction: after a restart, the volumes of pods/*/volumes are
// rebuilt into the actual state (from podvol's records where they exist, from the
// plugin's constructVolumeSpec otherwise) as 'uncertain', so nothing is lost or leaked.
import { errnoCode, errorMessage } from '../../errno.ts';
import { cleanupMountPoint } from '../../mount/cleanup.ts';
import {
  escapeQualifiedName,
  podsDir,
  podVolumeDir,
  podVolumesDir,
  unescapeQualifiedName,
} from '../../volumehost/paths.ts';
import { isDeviceMountable, reasonOf } from '../../volumehost/volume.ts';
import type { VolumeManagerContext } from './context.ts';
import { volumeKey } from './desired-state.ts';
import { forceUnmountUnresponsive } from './operation-generator.ts';
import { findRecordByInnerName, podOwned } from './records.ts';

/** A volume directory found at start-up that could not be reconstructed (kubelet's volumesFailedReconstruction). */
export interface FailedReconstruction {
  podUID: string;
  pluginName: string;
  innerName: string;
  dir: string;
}

/**
 * Pods reconstructed at once. Each pod is a few reads (its directories and its
 * volumes' records) that wait on libuv's thread pool (4 threads); one pod at a
 * time left it idle between awaits, and 2,001 volumes took 3 s (P5 in the README).
 */
const RECONSTRUCT_CONCURRENCY = 16;

/**
 * kubelet's reconstructVolumes: every volume directory on disk becomes an
 * uncertain ASW entry. Returns the ones that could not be, for cleanOrphanVolumes,
 * in the order of the pod directories.
 */
export async function reconstructVolumes(ctx: VolumeManagerContext): Promise<FailedReconstruction[]> {
  const uids = await readdirOrEmpty(ctx, podsDir(ctx.rootDir));
  const failed: FailedReconstruction[][] = uids.map(() => []);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < uids.length; i = next++) {
      const uid = uids[i];
      if (uid !== undefined) failed[i] = await reconstructPod(ctx, uid);
    }
  };
  await Promise.all(Array.from({ length: Math.min(RECONSTRUCT_CONCURRENCY, uids.length) }, worker));
  await reconstructDevices(ctx);
  return failed.flat();
}

/**
 * The devices found mounted on disk (CSI staging directories), uncertain, as
 * kubelet marks a reconstructed device: a pod's SetUp stages it again first,
 * and one that no pod uses any more is unstaged by the reconciler. kubelet
 * reconstructs only the devices of the pod volumes it finds and leaks a
 * staging mount whose pods are gone; podvol finds them all.
 */
async function reconstructDevices(ctx: VolumeManagerContext): Promise<void> {
  for (const name of ctx.pluginMgr.names()) {
    const plugin = ctx.pluginMgr.findPluginByName(name);
    if (!isDeviceMountable(plugin)) continue;
    try {
      for (const d of await plugin.constructDeviceSpecs()) {
        if (ctx.asw.deviceState(d.deviceName) !== undefined) continue;
        ctx.asw.markDeviceAsUncertain({ ...d, pluginName: name });
        ctx.logger.info({ volume: d.deviceName, plugin: name }, 'reconstructed device');
      }
    } catch (err) {
      ctx.metrics.operationError('reconstruct', reasonOf(err, 'ReconstructFailed'));
      ctx.logger.error({ plugin: name, err: errorMessage(err) }, 'could not reconstruct devices');
    }
  }
}

/** One pod directory's volumes (keys are per pod, so pods do not interfere). */
async function reconstructPod(ctx: VolumeManagerContext, uid: string): Promise<FailedReconstruction[]> {
  const root = ctx.rootDir;
  const failed: FailedReconstruction[] = [];
  if (!(await podOwned(ctx.host.getFs(), root, uid))) {
    ctx.logger.warn(
      { podUID: uid },
      'pod directory not created or adopted by podvol (no podvol record): not reconstructed, left alone',
    );
    return failed;
  }
  for (const escaped of await readdirOrEmpty(ctx, podVolumesDir(root, uid))) {
    const pluginName = unescapeQualifiedName(escaped);
    for (const volumeName of await readdirOrEmpty(ctx, `${podVolumesDir(root, uid)}/${escaped}`)) {
      if (!(await reconstructVolume(ctx, uid, pluginName, volumeName))) {
        const dir = `${podVolumesDir(root, uid)}/${escaped}/${volumeName}`;
        failed.push({ podUID: uid, pluginName, innerName: volumeName, dir });
      }
    }
  }
  return failed;
}

/**
 * kubelet's cleanOrphanVolumes, run once the desired state is complete: a volume
 * that failed reconstruction and that no pod wants is force-cleaned (counted in
 * force_cleaned_failed_volume_operations_total). kubelet hands it to the plugin's
 * TearDown, which fails when the plugin is unknown (the usual cause); podvol
 * unmounts whatever is mounted at the directory and removes it (mount-utils'
 * CleanupMountPoint), so it is not leaked. Failures are counted in
 * force_cleaned_failed_volume_operation_errors_total and left for orphan cleanup.
 */
export async function cleanOrphanVolumes(
  ctx: VolumeManagerContext,
  failed: FailedReconstruction[],
): Promise<void> {
  for (const f of failed) {
    const desired = ctx.dsw.pod(f.podUID);
    if (
      desired &&
      [...desired.volumes.values()].some((d) => d.volumeName === f.innerName || d.path?.startsWith(f.dir))
    ) {
      // Some pod needs the volume: SetUp will run and reconstruct it.
      continue;
    }
    ctx.logger.info(
      { podUID: f.podUID, volume: f.innerName, plugin: f.pluginName },
      'Cleaning up mounts for volume that could not be reconstructed',
    );
    try {
      // A mount there that does not answer would hang the cleanup (and the reconciler pass with it).
      await forceUnmountUnresponsive(ctx, f.dir, {
        podUID: f.podUID,
        volume: f.innerName,
        plugin: f.pluginName,
      });
      await cleanupMountPoint(f.dir, ctx.mounter, true, { fs: ctx.host.getFs().ops, logger: ctx.logger });
      ctx.metrics.forceCleaned?.(true);
    } catch (err) {
      ctx.metrics.forceCleaned?.(false);
      ctx.logger.error(
        { podUID: f.podUID, volume: f.innerName, plugin: f.pluginName, err: errorMessage(err) },
        'force cleanup of a volume that could not be reconstructed failed',
      );
    }
  }
}

/**
 * Adopts one volume found on disk (or in the mount table) into the actual state,
 * unless already known. `innerName` is the volume directory's name (a claim's
 * PersistentVolume name); podvol's record maps it back to the pod's volume name.
 */
export async function reconstructVolume(
  ctx: VolumeManagerContext,
  uid: string,
  pluginName: string,
  innerName: string,
): Promise<boolean> {
  try {
    const plugin = ctx.pluginMgr.findPluginByName(pluginName);
    const record = await findRecordByInnerName(ctx.host.getFs(), ctx.rootDir, uid, pluginName, innerName);
    const volumeName = record?.volumeName ?? innerName;
    const key = volumeKey(uid, volumeName);
    if (ctx.asw.get(key)) return true;
    const dir = podVolumeDir(ctx.rootDir, uid, escapeQualifiedName(plugin.name), innerName);
    const spec = record
      ? { volume: record.volume, persistentVolume: record.persistentVolume, readOnly: record.readOnly }
      : await plugin.constructVolumeSpec(innerName, dir);
    // The path the mounter reports (a CSI volume's is <dir>/mount), so /status matches a fresh mount.
    let path = dir;
    try {
      path = plugin.newMounter(spec, { metadata: { uid } }).getPath();
    } catch {}
    const created = record?.created ? Date.parse(record.created) : Number.NaN;
    ctx.asw.markVolumeMountAsUncertain({
      ...(Number.isNaN(created) ? {} : { created }),
      key,
      podUID: uid,
      podNamespace: record?.podNamespace ?? '',
      podName: record?.podName ?? '',
      volumeName,
      innerName,
      pluginName,
      spec,
      path,
      specExact: record !== undefined,
      reconstructed: true,
    });
    ctx.metrics.reconstructed(true);
    ctx.logger.info(
      { podUID: uid, volume: volumeName, plugin: pluginName, record: Boolean(record) },
      'reconstructed volume',
    );
    return true;
  } catch (err) {
    ctx.metrics.reconstructed(false);
    ctx.metrics.operationError('reconstruct', reasonOf(err, 'ReconstructFailed'));
    ctx.logger.error(
      { podUID: uid, volume: innerName, plugin: pluginName, err: errorMessage(err) },
      'could not reconstruct volume',
    );
    return false;
  }
}

/**
 * A volume reconstructed without podvol's record (a node taken over from
 * kubelet) is keyed by its directory's name, which for a claim is the
 * PersistentVolume's name, not the pod's volume name. Once the desired state
 * names the pod volume that lives in that directory, the entry takes its key,
 * as kubelet matches a reconstructed volume to the desired one: the reconciler
 * then sets it up again under the pod's own name (SetUp finds it in place) and
 * nothing is reported twice or torn down under a running pod.
 */
export function adoptReconstructedVolumes(ctx: VolumeManagerContext): void {
  const { asw, dsw, executor } = ctx;
  for (const v of asw.all()) {
    if (!v.reconstructed || v.specExact || executor.isPending(v.key)) continue;
    const desired = dsw.pod(v.podUID);
    if (!desired) continue;
    const d = [...desired.volumes.values()].find(
      (x) => x.innerName === v.innerName && x.pluginName === v.pluginName,
    );
    if (!d || d.key === v.key || asw.get(d.key) || executor.isPending(d.key)) continue;
    asw.syncReconstructedVolume(v.key, d);
    ctx.logger.info(
      { podUID: v.podUID, volume: d.volumeName, directory: v.innerName, plugin: v.pluginName },
      'reconstructed volume matched to the pod volume it belongs to',
    );
  }
}

/** readdir through the volume host's fs, with a missing directory (or a file in its place) read as empty. */
export async function readdirOrEmpty(
  ctx: Pick<VolumeManagerContext, 'host'>,
  dir: string,
): Promise<string[]> {
  try {
    return await ctx.host.getFs().ops.readdir(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return [];
    throw err;
  }
}
