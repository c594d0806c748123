// kubelet's reconciler: compares the desired and actual states of the world and
// starts the operations that close the gap. Only volumes of pods no longer
// desired are unmounted (and not while the runtime contract holds them): a
// pod whose volume spec changed under the same UID keeps what it has mounted.
import { isDeviceMountable, type Spec } from '../../volumehost/volume.ts';
import { canonicalJSON } from '../canonical-json.ts';
import type { DeviceMountedVolume, MountedVolume } from './actual-state.ts';
import type { VolumeManagerContext } from './context.ts';
import type { VolumeToMount } from './desired-state.ts';
import type { Operation } from './operation-executor.ts';
import { expandVolume, mountVolume, unmountDevice, unmountVolume } from './operation-generator.ts';

export type SpecChange = 'none' | 'rerender' | 'restart';

/**
 * kubelet's check for a desired volume whose spec changed under the same pod UID
 * (a static pod edited with an explicit metadata.uid): volumes kubelet re-renders
 * (configMap, secret, downwardAPI, projected) are re-rendered in place; any other
 * change waits for the pod to be recreated, because unmounting would pull the
 * volume from under containers that still use it.
 *
 * Each volume manager makes one and keeps it beside the state it compares: it
 * remembers the canonicalJSON of each spec object, because the reconciler and
 * every /status or runtime API answer compare the same pod objects again and
 * again (a changed pod brings new objects; specs are never changed in place).
 */
export function createSpecChange(): (v: MountedVolume, d: VolumeToMount | undefined) => SpecChange {
  const canonicalOfSpec = new WeakMap<object, string>();
  const canonicalVolume = (volume: object | undefined): string => {
    if (!volume) return canonicalJSON(volume);
    let text = canonicalOfSpec.get(volume);
    if (text === undefined) {
      text = canonicalJSON(volume);
      canonicalOfSpec.set(volume, text);
    }
    return text;
  };
  const sameSpec = (v: MountedVolume, d: VolumeToMount) =>
    !v.specExact || canonicalVolume(v.spec.volume) === canonicalVolume(d.spec?.volume);
  return (v, d) => {
    if (!d || d.problem) return 'none';
    if (d.pluginName === v.pluginName && sameSpec(v, d)) return 'none';
    return d.pluginName === v.pluginName && d.requiresRemount ? 'rerender' : 'restart';
  };
}

/** kubelet's reconciler.unmountVolumes: every mounted volume of a pod no longer desired nor held. */
export function volumesToUnmount(ctx: VolumeManagerContext): MountedVolume[] {
  const { asw, dsw } = ctx;
  // A pod still desired keeps every volume it has mounted, whatever its spec now says.
  return asw.all().filter((v) => !dsw.pod(v.podUID) && !ctx.heldPod?.(v.podUID));
}

/**
 * kubelet's reconciler.unmountVolumes: the unmount operations of this pass. The
 * reconciler offers them with the pass's mounts in one executor.offer(), which
 * decides what the pool starts.
 */
export function unmountVolumes(ctx: VolumeManagerContext, volumes = volumesToUnmount(ctx)): Operation[] {
  return volumes.map((v) => {
    const device = deviceOf(ctx, v.pluginName, v.spec);
    return {
      key: v.key,
      operationName: 'volume_unmount',
      fn: () => unmountVolume(ctx, v),
      // kubelet: the unmounts of one volume's pods run in parallel, never beside its MountDevice or UnmountDevice.
      ...(device !== undefined ? { device: { name: device, perPod: true } } : {}),
    };
  });
}

/**
 * kubelet's GetVolumeName for a device-mountable plugin: the device a spec's
 * operations lock (operation-executor.ts Operation.device), undefined for the
 * others (their operations are per pod).
 */
export function deviceOf(
  ctx: Pick<VolumeManagerContext, 'pluginMgr'>,
  pluginName: string | undefined,
  spec: Spec | undefined,
): string | undefined {
  if (pluginName === undefined || spec === undefined) return undefined;
  let plugin: ReturnType<VolumeManagerContext['pluginMgr']['findPluginByName']>;
  try {
    plugin = ctx.pluginMgr.findPluginByName(pluginName);
  } catch {
    return undefined;
  }
  if (!isDeviceMountable(plugin)) return undefined;
  try {
    return plugin.getDeviceName(spec);
  } catch {
    return undefined;
  }
}

/**
 * kubelet's reconciler.unmountDetachDevices: every device mounted (or maybe
 * mounted) that no pod volume in the actual state uses and no desired volume
 * wants. The walk over both states is done only while some device is known.
 */
export function devicesToUnmount(
  ctx: Pick<VolumeManagerContext, 'asw' | 'dsw' | 'pluginMgr'>,
): DeviceMountedVolume[] {
  const devices = ctx.asw.devices();
  if (devices.length === 0) return [];
  const used = new Set<string>();
  for (const v of ctx.asw.all()) {
    const name = deviceOf(ctx, v.pluginName, v.spec);
    if (name !== undefined) used.add(name);
  }
  for (const d of ctx.dsw.volumesToMount()) {
    const name = deviceOf(ctx, d.pluginName, d.spec);
    if (name !== undefined) used.add(name);
  }
  return devices.filter((d) => !used.has(d.deviceName));
}

/** The UnmountDevice operations of this pass, keyed (and locked) by the device's name. */
export function unmountDevices(ctx: VolumeManagerContext, devices = devicesToUnmount(ctx)): Operation[] {
  return devices.map((d) => ({
    key: d.deviceName,
    operationName: 'unmount_device',
    fn: () => unmountDevice(ctx, d),
    device: { name: d.deviceName, perPod: false },
  }));
}

/**
 * kubelet's reconciler.mountOrAttachVolumes: the operations of this pass for
 * every desired volume not mounted, due a remount or a resize, in the order
 * they should get the pool's slots.
 */
export function mountVolumes(ctx: VolumeManagerContext): Operation[] {
  const { asw, dsw } = ctx;
  const operations: Operation[] = [];
  // Volumes not yet mounted are offered the pool's free slots before refreshes
  // of mounted ones: the periodic refresh of a 1,000-volume pod takes longer
  // than its period, and served first it kept the rest of the pod (or a new
  // pod) waiting for ever.
  const refreshes: [VolumeToMount, MountedVolume][] = [];
  for (const d of dsw.volumesToMount()) {
    const v = asw.get(d.key);
    const change = v ? ctx.specChange(v, d) : 'none';
    if (v && change === 'restart') {
      // A volume found on disk after a restart (or left uncertain by a failed
      // SetUp) is confirmed as kubelet's reconciler confirms any uncertain
      // volume, by its SetUp, but with the spec it was mounted with: the
      // changed spec cannot be applied to a volume in use, and a volume never
      // confirmed would keep its pod from being ready for ever.
      if (v.state === 'uncertain') mount(asMounted(d, v), v);
      continue;
    }
    if (v && v.state === 'mounted' && !v.remountRequired && change === 'none') {
      // kubelet's GenerateExpandInUseVolumeFunc: the claim asked for more room while the pod runs.
      const pod = v.resizeRequired ? dsw.pod(d.podUID)?.pod : undefined;
      if (v.resizeRequired && pod)
        operations.push({
          key: d.key,
          operationName: 'volume_fs_resize',
          fn: () => expandVolume(ctx, v, pod),
          ...locked(d),
        });
      continue;
    }
    if (v?.state === 'mounted') refreshes.push([d, v]);
    else mount(d, v);
  }
  for (const [d, v] of refreshes) mount(d, v);
  return operations;

  function mount(d: VolumeToMount, v: MountedVolume | undefined): void {
    const pod = dsw.pod(d.podUID)?.pod;
    if (pod)
      operations.push({
        key: d.key,
        operationName: 'volume_mount',
        fn: () => mountVolume(ctx, d, pod, v),
        ...locked(d),
      });
  }

  /** kubelet: every mount of a device-mountable volume runs alone among its volume's operations (no pod in its key). */
  function locked(d: VolumeToMount): Pick<Operation, 'device'> {
    const device = deviceOf(ctx, d.pluginName, d.spec);
    return device !== undefined ? { device: { name: device, perPod: false } } : {};
  }
}

/** The desired volume `d` as `v` was set up: its plugin, spec and directory (see mountVolumes). */
function asMounted(d: VolumeToMount, v: MountedVolume): VolumeToMount {
  return { ...d, pluginName: v.pluginName, spec: v.spec, path: v.path, innerName: v.innerName };
}
