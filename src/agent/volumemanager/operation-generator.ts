// kubelet's operation_generator: the mount and unmount operations the
// reconciler hands to the operation executor, with their metrics, logs and Events.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { UNRESPONSIVE_AFTER_MS } from '../../mount/deadline-stat.ts';
import { isNodeExpandable, type MounterArgs, reasonOf, VolumeError } from '../../plugins/types.ts';
import { nodeAffinityMismatch } from '../../plugins/util/node-affinity.ts';
import { podPluginsDir, podVolumesDir } from '../../volumehost/paths.ts';
import { relativeBeneath } from '../../volumehost/safe-fs.ts';
import type { MountedVolume } from './actual-state.ts';
import type { VolumeManagerContext } from './context.ts';
import type { VolumeToMount } from './desired-state.ts';
import { markPodOwned, removeRecord, writeRecord } from './records.ts';

/** What an operation needs of the volume manager (`podvol plan` runs them with no more). */
export type OperationContext = Pick<
  VolumeManagerContext,
  'logger' | 'metrics' | 'pluginMgr' | 'rootDir' | 'host' | 'asw' | 'cleanSubPaths'
>;

/** kubelet's FsUserFrom: the runAsUser every container agrees on, if any. */
function fsUserFrom(pod: V1Pod): number | undefined {
  const users = new Set<number | undefined>();
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]) {
    users.add(c.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser);
  }
  if (users.size !== 1) return undefined;
  return [...users][0];
}

export function mounterArgsFor(pod: V1Pod): MounterArgs {
  return {
    fsUser: fsUserFrom(pod),
    fsGroup: pod.spec?.securityContext?.fsGroup,
    fsGroupChangePolicy: pod.spec?.securityContext?.fsGroupChangePolicy,
  };
}

/**
 * Served filesystems (FUSE, NFS, ...) at or below `path` that do not answer a
 * stat within the deadline (found in the mount table, probed by the volume
 * host's StatProbe, one child per path however often this is retried) fail
 * the operation with FilesystemUnresponsive instead of hanging it.
 */
export async function failIfUnresponsive(ctx: Pick<OperationContext, 'host'>, path: string): Promise<void> {
  const { host } = ctx;
  const hung = await host.getStatProbe().unresponsiveMounts(await host.getMounter().list(), path);
  if (hung.length > 0)
    throw new VolumeError(
      'FilesystemUnresponsive',
      hung.map((h) => `${h.mountPoint}: ${h.message}`).join('; '),
    );
}

/** kubelet's GenerateMountVolumeFunc: make the pod directories, write the record, SetUp, record the result. */
export async function mountVolume(
  ctx: OperationContext,
  d: VolumeToMount,
  pod: V1Pod,
  prev: MountedVolume | undefined,
): Promise<void> {
  const { logger, metrics, pluginMgr, rootDir, host, asw } = ctx;
  const { pluginName, spec } = d;
  // The reconciler only mounts volumes a plugin matched; a volume with a problem never gets here.
  if (pluginName === undefined || spec === undefined)
    throw new VolumeError('UnknownVolumeSource', d.problem?.message ?? 'no volume plugin matched');
  const log = {
    pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`,
    podUID: d.podUID,
    volume: d.volumeName,
    plugin: pluginName,
  };
  if (prev) prev.remountRequired = false;
  const t0 = performance.now();
  const base: MountedVolume = {
    key: d.key,
    podUID: d.podUID,
    podNamespace: pod.metadata?.namespace ?? '',
    podName: pod.metadata?.name ?? '',
    volumeName: d.volumeName,
    innerName: d.innerName,
    pluginName,
    spec,
    path: d.path ?? '',
    state: 'uncertain',
    remountRequired: prev?.remountRequired ?? false,
    specExact: true,
    reconstructed: prev?.reconstructed ?? false,
  };
  try {
    // kubelet's checkNodeAffinity, before anything is created for the volume.
    const mismatch = spec.persistentVolume
      ? nodeAffinityMismatch(spec.persistentVolume, {
          name: host.getNodeName(),
          labels: host.getNodeLabels(),
        })
      : undefined;
    if (mismatch !== undefined) throw new VolumeError('NodeAffinityMismatch', mismatch);
    const mounter = pluginMgr.findPluginByName(pluginName).newMounter(spec, pod);
    // Owned first (see records.ts), then kubelet's makePodDataDirs: the pod, volumes and plugins directories, 0750.
    const fs = host.getFs();
    await markPodOwned(fs, rootDir, d.podUID);
    await fs.mkdirAllBeneath(rootDir, relativeBeneath(rootDir, podVolumesDir(rootDir, d.podUID)), 0o750);
    await fs.mkdirAllBeneath(rootDir, relativeBeneath(rootDir, podPluginsDir(rootDir, d.podUID)), 0o750);
    // The record is written before SetUp so that a crash half-way leaves enough to tear it down.
    await writeRecord(fs, rootDir, {
      version: 1,
      podUID: d.podUID,
      podNamespace: base.podNamespace,
      podName: base.podName,
      volumeName: d.volumeName,
      pluginName,
      volume: spec.volume ?? { name: d.volumeName },
      readOnly: spec.readOnly,
      ...(d.innerName !== d.volumeName ? { innerName: d.innerName } : {}),
      ...(spec.persistentVolume ? { persistentVolume: spec.persistentVolume } : {}),
    }).catch(() => {});
    // A volume found on disk (reconstructed at start, or left uncertain by a
    // failed SetUp) may be a mount that no longer answers (a FUSE or NFS server
    // gone): SetUp would wait on it for ever and hold a thread of the daemon.
    if (prev?.state === 'uncertain' && d.path) await failIfUnresponsive(ctx, d.path);
    await mounter.setUp(mounterArgsFor(pod));
  } catch (err) {
    const seconds = (performance.now() - t0) / 1000;
    const reason = reasonOf(err, 'MountFailed');
    metrics.operation(pluginName, 'volume_mount', false, seconds);
    metrics.operationError('volume_mount', reason);
    // Whatever SetUp left behind must be torn down if the pod goes away.
    asw.set({
      ...base,
      state: prev?.state === 'mounted' ? 'mounted' : 'uncertain',
      remountRequired: prev?.state === 'mounted',
    });
    const message = errorMessage(err);
    logger.warn(
      { ...log, durationMs: Math.round(seconds * 1000), reason, err: message },
      'MountVolume.SetUp failed',
    );
    host
      .getEventRecorder()
      .eventf(
        pod,
        'Warning',
        'FailedMount',
        `${reason === 'NodeAffinityMismatch' ? 'MountVolume.NodeAffinity check failed' : 'MountVolume.SetUp failed'} for volume "${d.volumeName}" : ${message}`,
      );
    throw err;
  }
  const seconds = (performance.now() - t0) / 1000;
  metrics.operation(pluginName, 'volume_mount', true, seconds);
  const current = asw.get(d.key);
  asw.set({ ...base, state: 'mounted', remountRequired: current?.remountRequired ?? false });
  logger.info(
    { ...log, durationMs: Math.round(seconds * 1000), remount: prev !== undefined },
    'MountVolume.SetUp succeeded',
  );
}

/**
 * A mount at or below the volume whose filesystem does not answer (a FUSE
 * daemon stopped, a dead NFS server) would hang the TearDown, and with it a
 * thread of the daemon, forever. Such mounts are unmounted first with
 * kubelet's UnmountWithForce rule (umount with a deadline, then -f) and, if
 * that fails too, detached lazily; the TearDown then finds nothing that hangs.
 */
export async function forceUnmountUnresponsive(
  ctx: Pick<OperationContext, 'host' | 'logger'>,
  path: string,
  log: Record<string, string>,
): Promise<void> {
  if (!path) return;
  const mounter = ctx.host.getMounter();
  for (const hung of await ctx.host.getStatProbe().unresponsiveMounts(await mounter.list(), path)) {
    ctx.logger.warn(
      { ...log, mountPoint: hung.mountPoint, err: hung.message },
      'unmounting an unresponsive filesystem with force',
    );
    const outcome = await mounter.unmountWithForce(hung.mountPoint, UNRESPONSIVE_AFTER_MS);
    ctx.logger.warn({ ...log, mountPoint: hung.mountPoint, outcome }, 'unresponsive filesystem unmounted');
  }
}

/** kubelet's GenerateUnmountVolumeFunc: TearDown, then forget the volume and its record. */
export async function unmountVolume(ctx: OperationContext, v: MountedVolume): Promise<void> {
  const { logger, metrics, pluginMgr, rootDir, asw, host } = ctx;
  const log = {
    pod: `${v.podNamespace}/${v.podName}`,
    podUID: v.podUID,
    volume: v.volumeName,
    plugin: v.pluginName,
  };
  const t0 = performance.now();
  try {
    await forceUnmountUnresponsive(ctx, v.path, log);
    await ctx.cleanSubPaths?.(v.podUID, v.innerName);
    await pluginMgr.findPluginByName(v.pluginName).newUnmounter(v.innerName, v.podUID).tearDown();
  } catch (err) {
    const seconds = (performance.now() - t0) / 1000;
    const reason = reasonOf(err, 'UnmountFailed');
    metrics.operation(v.pluginName, 'volume_unmount', false, seconds);
    metrics.operationError('volume_unmount', reason);
    v.state = 'uncertain';
    const message = errorMessage(err);
    logger.warn(
      { ...log, durationMs: Math.round(seconds * 1000), reason, err: message },
      'UnmountVolume.TearDown failed',
    );
    // kubelet only logs this. The pod (still in the API while it terminates) gets kubelet's
    // FailedUnMount Event too, so whoever holds a busy volume is named where the pod's owner looks.
    if (v.podName) {
      host
        .getEventRecorder()
        .eventf(
          { metadata: { namespace: v.podNamespace, name: v.podName, uid: v.podUID } },
          'Warning',
          'FailedUnMount',
          `UnmountVolume.TearDown failed for volume "${v.volumeName}" : ${message}`,
        );
    }
    throw err;
  }
  const seconds = (performance.now() - t0) / 1000;
  metrics.operation(v.pluginName, 'volume_unmount', true, seconds);
  asw.delete(v.key);
  await removeRecord(host.getFs(), rootDir, v.podUID, v.pluginName, v.volumeName);
  logger.info({ ...log, durationMs: Math.round(seconds * 1000) }, 'UnmountVolume.TearDown succeeded');
}

/**
 * kubelet's GenerateExpandInUseVolumeFunc: the plugin grows the filesystem of
 * a volume mounted under a running pod (it updates the claim itself). A
 * failure is retried with the operation's backoff; the volume stays mounted.
 */
export async function expandVolume(ctx: VolumeManagerContext, v: MountedVolume, pod: V1Pod): Promise<void> {
  const { logger, metrics, pluginMgr, host } = ctx;
  const log = {
    pod: `${v.podNamespace}/${v.podName}`,
    podUID: v.podUID,
    volume: v.volumeName,
    plugin: v.pluginName,
  };
  const plugin = pluginMgr.findPluginByName(v.pluginName);
  const t0 = performance.now();
  try {
    if (isNodeExpandable(plugin)) await plugin.nodeExpand(v.spec, pod);
    v.resizeRequired = false;
  } catch (err) {
    const seconds = (performance.now() - t0) / 1000;
    const reason = reasonOf(err, 'ExpansionFailed');
    metrics.operation(v.pluginName, 'volume_fs_resize', false, seconds);
    metrics.operationError('volume_fs_resize', reason);
    const message = errorMessage(err);
    logger.warn(
      { ...log, durationMs: Math.round(seconds * 1000), reason, err: message },
      'NodeExpandVolume failed',
    );
    host
      .getEventRecorder()
      .eventf(
        pod,
        'Warning',
        'FileSystemResizeFailed',
        `MountVolume.NodeExpandVolume failed for volume "${v.volumeName}" : ${message}`,
      );
    throw err;
  }
  const seconds = (performance.now() - t0) / 1000;
  metrics.operation(v.pluginName, 'volume_fs_resize', true, seconds);
  logger.info(
    { ...log, durationMs: Math.round(seconds * 1000) },
    'NodeExpandVolume of a mounted volume done',
  );
}
