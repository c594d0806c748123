// kubelet's reconstruction: after a restart, the volumes of pods/*/volumes are
// rebuilt into the actual state (from podvol's records where they exist, from the
// plugin's constructVolumeSpec otherwise) as 'uncertain', so nothing is lost or leaked.
import { readdir } from 'node:fs/promises';
import { reasonOf } from '../../plugins/types.ts';
import { podsDir, podVolumesDir, unescapeQualifiedName } from '../../volumehost/paths.ts';
import type { VolumeManagerContext } from './context.ts';
import { volumeKey } from './desired-state.ts';
import { findRecordByInnerName } from './records.ts';

/** kubelet's reconstructVolumes: every volume directory on disk becomes an uncertain ASW entry. */
export async function reconstructVolumes(ctx: VolumeManagerContext): Promise<void> {
  const root = ctx.rootDir;
  for (const uid of await readdirOrEmpty(podsDir(root))) {
    for (const escaped of await readdirOrEmpty(podVolumesDir(root, uid))) {
      const pluginName = unescapeQualifiedName(escaped);
      for (const volumeName of await readdirOrEmpty(`${podVolumesDir(root, uid)}/${escaped}`)) {
        await reconstructVolume(ctx, uid, pluginName, volumeName);
      }
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
): Promise<void> {
  try {
    const plugin = ctx.pluginMgr.findPluginByName(pluginName);
    const record = await findRecordByInnerName(ctx.rootDir, uid, pluginName, innerName);
    const volumeName = record?.volumeName ?? innerName;
    const key = volumeKey(uid, volumeName);
    if (ctx.asw.get(key)) return;
    const dir = `${podVolumesDir(ctx.rootDir, uid)}/${plugin.name.replaceAll('/', '~')}/${innerName}`;
    const spec = record
      ? { volume: record.volume, persistentVolume: record.persistentVolume, readOnly: record.readOnly }
      : plugin.constructVolumeSpec(innerName, dir);
    // The path the mounter reports (a CSI volume's is <dir>/mount), so /status matches a fresh mount.
    let path = dir;
    try {
      path = plugin.newMounter(spec, { metadata: { uid } }).getPath();
    } catch {}
    ctx.asw.set({
      key,
      podUID: uid,
      podNamespace: record?.podNamespace ?? '',
      podName: record?.podName ?? '',
      volumeName,
      innerName,
      pluginName,
      spec,
      path,
      state: 'uncertain',
      remountRequired: false,
      specExact: record !== undefined,
      reconstructed: true,
    });
    ctx.metrics.reconstructed(true);
    ctx.logger.info(
      { podUID: uid, volume: volumeName, plugin: pluginName, record: Boolean(record) },
      'reconstructed volume',
    );
  } catch (err) {
    ctx.metrics.reconstructed(false);
    ctx.metrics.operationError('reconstruct', reasonOf(err, 'ReconstructFailed'));
    ctx.logger.error(
      { podUID: uid, volume: innerName, plugin: pluginName, err: (err as Error).message },
      'could not reconstruct volume',
    );
  }
}

/** readdir, with a missing directory (or a file in its place) read as empty. */
export async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR')
      return [];
    throw err;
  }
}
