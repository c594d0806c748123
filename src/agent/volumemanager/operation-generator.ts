// kubelet's operation_generator: the mount and unmount operations the
// reconciler hands to the operation executor, with their metrics, logs and Events.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { UNRESPONSIVE_AFTER_MS } from '../../mount/deadline-stat.ts';
import { nodeAffinityMismatch } from '../../plugins/util/node-affinity.ts';
import type { VolumeReason } from '../../reasons.ts';
import { podPluginsDir, podVolumesDir } from '../../volumehost/paths.ts';
import { relativeBeneath, type SafeFs } from '../../volumehost/safe-fs.ts';
import {
  type DeviceMountableVolumePlugin,
  isDeviceMountable,
  isNodeExpandable,
  type MounterArgs,
  reasonOf,
  specName,
  VolumeError,
} from '../../volumehost/volume.ts';
import type {
  ActualStateOfWorld,
  DeviceMountedVolume,
  MarkVolumeOpts,
  MountedVolume,
} from './actual-state.ts';
import type { OperationName, VolumeManagerContext } from './context.ts';
import type { VolumeToMount } from './desired-state.ts';
import { markPodOwned, removeRecord, writeRecord } from './records.ts';

/** What an operation needs of the volume manager (`podvol plan` runs them with no more). */
export type OperationContext = Pick<
  VolumeManagerContext,
  'logger' | 'metrics' | 'pluginMgr' | 'rootDir' | 'host' | 'asw' | 'cleanSubPaths' | 'freshMountTable'
>;

/**
 * An operation's bookkeeping, started now: kubelet's duration metric, and on
 * a failure its error metric and the warning log line; the caller adds its
 * own success line and Event.
 */
function startOperation(
  ctx: Pick<OperationContext, 'logger' | 'metrics'>,
  pluginName: string,
  operation: OperationName,
  log: Record<string, unknown>,
) {
  const t0 = performance.now();
  const durationMs = (seconds: number) => Math.round(seconds * 1000);
  return {
    /** Records a failure (reason: the error's, else `fallback`) and logs `what`; the reason and message for the Event. */
    failed(err: unknown, fallback: VolumeReason, what: string): { reason: VolumeReason; message: string } {
      const seconds = (performance.now() - t0) / 1000;
      const reason = reasonOf(err, fallback);
      ctx.metrics.operation(pluginName, operation, false, seconds);
      ctx.metrics.operationError(operation, reason);
      const message = errorMessage(err);
      ctx.logger.warn({ ...log, durationMs: durationMs(seconds), reason, err: message }, what);
      return { reason, message };
    },
    /** Records a success; the duration for the success line. */
    succeeded(): number {
      const seconds = (performance.now() - t0) / 1000;
      ctx.metrics.operation(pluginName, operation, true, seconds);
      return durationMs(seconds);
    },
  };
}

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
export async function failIfUnresponsive(
  ctx: Pick<OperationContext, 'host' | 'freshMountTable'>,
  path: string,
): Promise<void> {
  const hung = await ctx.host.getStatProbe().unresponsiveMounts(await ctx.freshMountTable(), path);
  if (hung.length > 0)
    throw new VolumeError(
      'FilesystemUnresponsive',
      hung.map((h) => `${h.mountPoint}: ${h.message}`).join('; '),
    );
}

/**
 * kubelet's GenerateMountVolumeFunc: make the pod directories, write the
 * record, SetUp, record the result. One walk from the root to the pod's
 * directories for all of it: the operation's held directories
 * (SafeFs.withHeldDirs), whose SafeFs every step and the plugin's SetUp
 * (MounterArgs.fs) walk through.
 */
export function mountVolume(
  ctx: OperationContext,
  d: VolumeToMount,
  pod: V1Pod,
  prev: MountedVolume | undefined,
): Promise<void> {
  return ctx.host.getFs().withHeldDirs((fs) => mountVolumeSteps(ctx, fs, d, pod, prev));
}

async function mountVolumeSteps(
  ctx: OperationContext,
  fs: SafeFs,
  d: VolumeToMount,
  pod: V1Pod,
  prev: MountedVolume | undefined,
): Promise<void> {
  const { logger, pluginMgr, rootDir, host, asw } = ctx;
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
  asw.clearRemountRequired(d.key);
  const op = startOperation(
    ctx,
    pluginName,
    prev?.state === 'mounted' ? 'volume_refresh' : 'volume_mount',
    log,
  );
  // An adopted volume keeps its record's time; this process's first-desired time only starts a new one.
  const created = prev?.created ?? d.since;
  const base: MarkVolumeOpts = {
    key: d.key,
    podUID: d.podUID,
    podNamespace: pod.metadata?.namespace ?? '',
    podName: pod.metadata?.name ?? '',
    volumeName: d.volumeName,
    innerName: d.innerName,
    pluginName,
    spec,
    path: d.path ?? '',
    specExact: true,
    reconstructed: prev?.reconstructed ?? false,
    created,
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
    const plugin = pluginMgr.findPluginByName(pluginName);
    const mounter = plugin.newMounter(spec, pod);
    // Owned first (see records.ts), then kubelet's makePodDataDirs: the pod, volumes and plugins directories, 0750.
    await markPodOwned(fs, rootDir, d.podUID);
    await fs.mkdirAllBeneath(rootDir, relativeBeneath(rootDir, podVolumesDir(rootDir, d.podUID)), 0o750);
    await fs.mkdirAllBeneath(rootDir, relativeBeneath(rootDir, podPluginsDir(rootDir, d.podUID)), 0o750);
    // The record is written before SetUp so that a crash half-way leaves enough to tear it down.
    // Without it SetUp still goes ahead (reconstruction can rebuild most volumes from their
    // directory), but the lost safety net is logged: it matters if podvol crashes next.
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
      created: new Date(created).toISOString(),
    }).catch((err: unknown) => {
      logger.warn(
        { ...log, reason: reasonOf(err, 'RecordWriteFailed'), err: errorMessage(err) },
        'writing the volume record failed; SetUp goes ahead without it',
      );
    });
    // A volume found on disk (reconstructed at start, or left uncertain by a
    // failed SetUp) may be a mount that no longer answers (a FUSE or NFS server
    // gone): SetUp would wait on it for ever and hold a thread of the daemon.
    if (prev?.state === 'uncertain' && d.path) await failIfUnresponsive(ctx, d.path);
    if (isDeviceMountable(plugin)) await mountDevice(asw, plugin, spec, pod);
    await mounter.setUp({ ...mounterArgsFor(pod), fs });
  } catch (err) {
    // A mounted volume stays as it was and is refreshed again; whatever a first
    // SetUp left behind must be torn down if the pod goes away.
    if (prev?.state === 'mounted') asw.markRemountRequired((v) => v.key === d.key, d.podUID);
    else asw.markVolumeMountAsUncertain(base);
    const { reason, message } = op.failed(err, 'MountFailed', 'MountVolume.SetUp failed');
    // kubelet's GenerateError: the step that failed, the spec's name (a claim's PersistentVolume), the error.
    const step =
      reason === 'NodeAffinityMismatch'
        ? 'MountVolume.NodeAffinity check failed'
        : err instanceof VolumeError && err.step
          ? `MountVolume.${err.step} failed`
          : 'MountVolume.SetUp failed';
    const shown = err instanceof VolumeError && err.eventMessage !== undefined ? err.eventMessage : message;
    // Waiting for attachment is no failure yet: kubelet's VerifyControllerAttachedVolume posts
    // nothing and its WaitForAttach blocks until attached or timed out (AttachTimedOut, which does).
    if (reason !== 'AttachPending') {
      host
        .getEventRecorder()
        .eventf(pod, 'Warning', 'FailedMount', `${step} for volume "${specName(spec)}" : ${shown}`);
    }
    throw err;
  }
  const durationMs = op.succeeded();
  asw.markVolumeAsMounted(base);
  logger.info({ ...log, durationMs, remount: prev !== undefined }, 'MountVolume.SetUp succeeded');
}

/**
 * kubelet's GenerateMountVolumeFunc before SetUp: WaitForAttach and MountDevice
 * (NodeStageVolume) unless the device is mounted for certain already, then
 * the device in the actual state. An uncertain failure (the driver may still
 * be staging) marks a device not yet known as uncertain, as kubelet's
 * markDeviceErrorState, so that it is unstaged if no pod comes to use it. A
 * final one leaves an uncertain device uncertain, where kubelet unmarks it:
 * the plugin's clean-up may have found it mounted (rmdir EBUSY) and kept it,
 * and only UnmountDevice, which finds out, takes it out of the state.
 */
async function mountDevice(
  asw: ActualStateOfWorld,
  plugin: DeviceMountableVolumePlugin,
  spec: NonNullable<VolumeToMount['spec']>,
  pod: V1Pod,
): Promise<void> {
  const deviceName = plugin.getDeviceName(spec);
  if (deviceName === undefined) return;
  const state = asw.deviceState(deviceName);
  if (state === 'mounted') return;
  const device = {
    deviceName,
    pluginName: plugin.name,
    spec,
    deviceMountPath: plugin.getDeviceMountPath(spec),
  };
  try {
    await plugin.mountDevice(spec, pod);
  } catch (err) {
    if (err instanceof VolumeError && err.uncertain && state === undefined) asw.markDeviceAsUncertain(device);
    throw err;
  }
  asw.markDeviceAsMounted(device);
}

/**
 * kubelet's GenerateUnmountDeviceFunc: the device of a volume no pod has set up
 * and the desired state no longer wants (the reconciler decides) is unmounted
 * (NodeUnstageVolume) in an operation of its own, so that a failing unstage
 * never fails a pod's TearDown. Until it succeeds the device stays in the
 * actual state, uncertain (a new pod stages it again first), and so in
 * node.status.volumesInUse; the executor retries it with its backoff.
 */
export async function unmountDevice(ctx: OperationContext, device: DeviceMountedVolume): Promise<void> {
  const { logger, pluginMgr, asw } = ctx;
  const log = {
    volume: device.deviceName,
    plugin: device.pluginName,
    deviceMountPath: device.deviceMountPath,
  };
  const op = startOperation(ctx, device.pluginName, 'unmount_device', log);
  try {
    const plugin = pluginMgr.findPluginByName(device.pluginName);
    if (!isDeviceMountable(plugin))
      throw new VolumeError('UnmountFailed', `plugin ${plugin.name} does not mount devices`);
    await plugin.unmountDevice(device.deviceMountPath);
  } catch (err) {
    asw.markDeviceAsUncertain(device);
    op.failed(err, 'UnmountFailed', 'UnmountDevice failed');
    throw err;
  }
  asw.markDeviceAsUnmounted(device.deviceName);
  logger.info({ ...log, durationMs: op.succeeded() }, 'UnmountDevice succeeded');
}

/**
 * A mount at or below the volume whose filesystem does not answer (a FUSE
 * daemon stopped, a dead NFS server) would hang the TearDown, and with it a
 * thread of the daemon, forever. Such mounts are unmounted first with
 * kubelet's UnmountWithForce rule (umount with a deadline, then -f) and, if
 * that fails too, detached lazily; the TearDown then finds nothing that hangs.
 */
export async function forceUnmountUnresponsive(
  ctx: Pick<OperationContext, 'host' | 'logger' | 'freshMountTable'>,
  path: string,
  log: Record<string, string>,
): Promise<void> {
  if (!path) return;
  const mounter = ctx.host.getMounter();
  // One table read shared with the teardowns running now, begun after this one asked (fresh-read.ts).
  const table = await ctx.freshMountTable();
  for (const hung of await ctx.host.getStatProbe().unresponsiveMounts(table, path)) {
    ctx.logger.warn(
      { ...log, mountPoint: hung.mountPoint, err: hung.message },
      'unmounting an unresponsive filesystem with force',
    );
    // Up to three deadlines on a filesystem that does not answer: without the operation's pool slot.
    const outcome = await ctx.host
      .getStatProbe()
      .whileWaiting(() => mounter.unmountWithForce(hung.mountPoint, UNRESPONSIVE_AFTER_MS));
    ctx.logger.warn({ ...log, mountPoint: hung.mountPoint, outcome }, 'unresponsive filesystem unmounted');
  }
}

/**
 * kubelet's GenerateUnmountVolumeFunc: TearDown, then forget the volume and
 * its record. One walk from the root to the pod's directories for the subPath
 * clean-up, the TearDown and the record (the operation's SafeFs.withHeldDirs,
 * handed to each: UnmounterArgs.fs).
 */
export function unmountVolume(ctx: OperationContext, v: MountedVolume): Promise<void> {
  return ctx.host.getFs().withHeldDirs((fs) => unmountVolumeSteps(ctx, fs, v));
}

async function unmountVolumeSteps(ctx: OperationContext, fs: SafeFs, v: MountedVolume): Promise<void> {
  const { logger, pluginMgr, rootDir, asw, host } = ctx;
  const log = {
    pod: `${v.podNamespace}/${v.podName}`,
    podUID: v.podUID,
    volume: v.volumeName,
    plugin: v.pluginName,
  };
  const op = startOperation(ctx, v.pluginName, 'volume_unmount', log);
  try {
    await forceUnmountUnresponsive(ctx, v.path, log);
    await ctx.cleanSubPaths?.(v.podUID, v.innerName, fs);
    await pluginMgr.findPluginByName(v.pluginName).newUnmounter(v.innerName, v.podUID).tearDown({ fs });
  } catch (err) {
    asw.markVolumeMountAsUncertain(v);
    const { message } = op.failed(err, 'UnmountFailed', 'UnmountVolume.TearDown failed');
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
  const durationMs = op.succeeded();
  asw.markVolumeAsUnmounted(v.key);
  await removeRecord(fs, rootDir, v.podUID, v.pluginName, v.volumeName);
  logger.info({ ...log, durationMs }, 'UnmountVolume.TearDown succeeded');
}

/**
 * kubelet's GenerateExpandInUseVolumeFunc: the plugin grows the filesystem of
 * a volume mounted under a running pod (it updates the claim itself). A
 * failure is retried with the operation's backoff; the volume stays mounted.
 */
export async function expandVolume(ctx: VolumeManagerContext, v: MountedVolume, pod: V1Pod): Promise<void> {
  const { logger, pluginMgr, host } = ctx;
  const log = {
    pod: `${v.podNamespace}/${v.podName}`,
    podUID: v.podUID,
    volume: v.volumeName,
    plugin: v.pluginName,
  };
  const plugin = pluginMgr.findPluginByName(v.pluginName);
  const op = startOperation(ctx, v.pluginName, 'volume_fs_resize', log);
  try {
    if (isNodeExpandable(plugin)) await plugin.nodeExpand(v.spec, pod);
    ctx.asw.markVolumeAsResized(v.key);
  } catch (err) {
    const { message } = op.failed(err, 'ExpansionFailed', 'NodeExpandVolume failed');
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
  logger.info({ ...log, durationMs: op.succeeded() }, 'NodeExpandVolume of a mounted volume done');
}
