// kubernetes.io/csi (kubelet's pkg/volume/csi/csi_plugin.go): PersistentVolumes
// with a csi source and inline ephemeral CSI volumes, driven over gRPC through
// the driver that registered under <root>/plugins_registry. This file is the
// plugin itself (CanSupport, NewMounter, ConstructVolumeSpec, the device
// mounter's entry points, stats); its parts live where kubelet keeps them:
// csi-context.ts (what the csiPlugin struct holds: clients, secrets, lister),
// csi-util.ts (a spec's source and rules), csi-attacher.ts (WaitForAttach,
// MountDevice/UnmountDevice = NodeStage/NodeUnstage), csi-mounter.ts
// (SetUp/TearDown = NodePublish/NodeUnpublish), expander.ts (NodeExpand),
// client.ts (the gRPC calls), vol-data.ts (the layout and vol_data.json).
//
// As kubelet's, the plugin is device-mountable: the volume manager stages a
// persistent volume once per node (MountDevice) before a pod's SetUp, and
// unstages it in an operation of its own once no pod has it published and
// the desired state no longer wants it (UnmountDevice).
import { join } from 'node:path';
import {
  type DeviceMountableVolumePlugin,
  type NodeExpandableVolumePlugin,
  type Spec,
  specName,
  VolumeError,
} from '../../volumehost/volume.ts';
import type { CSIClient } from './client.ts';
import { createCSIAttacher, deviceNameOf } from './csi-attacher.ts';
import { type CSIPluginOptions, createCSIContext } from './csi-context.ts';
import { CSIMounter, CSIUnmounter } from './csi-mounter.ts';
import { inlineSource, podSourceOf, pvSource, rpcError } from './csi-util.ts';
import { nodeExpand } from './expander.ts';
import {
  checkDriverName,
  checkSpecName,
  csiPluginName,
  loadVolumeData,
  stagingPath,
  uniqueVolumeName,
  volDataKey,
} from './vol-data.ts';

export { csiAccessMode, supportsFSGroup } from './csi-util.ts';
export type { CSIPluginOptions };
export { csiPluginName };

export interface VolumeStatsSummary {
  capacityBytes: number;
  availableBytes: number;
  usedBytes: number;
  inodes: number;
  inodesFree: number;
  inodesUsed: number;
}

export interface CSIPlugin extends NodeExpandableVolumePlugin, DeviceMountableVolumePlugin {
  /**
   * NodeGetVolumeStats of a published volume when the driver has GET_VOLUME_STATS
   * (undefined otherwise): bytes and inodes as kubelet's metrics report them.
   */
  volumeStats(podUID: string, innerName: string): Promise<VolumeStatsSummary | undefined>;
  /** kubernetes.io/csi/<driver>^<handle> when the spec needs attaching (kubelet's CanAttach), else undefined. */
  attachableVolumeName(spec: Spec): string | undefined;
  /** The phase a volume is in while its mount runs (attaching, staging, publishing), for /status. */
  phaseOf(podUID: string, innerName: string): string | undefined;
  /**
   * Shutdown: cancels every CSI call in flight and any later one (gRPC
   * Canceled, so the volumes stay uncertain and the next start finishes the
   * job), so that a driver that never answers cannot hold podvol's exit for
   * the 2-minute deadline. kubelet simply exits; this is the same outcome.
   */
  cancelCalls(): number;
}

export function csiPlugin(o: CSIPluginOptions): CSIPlugin {
  const ctx = createCSIContext(o);
  const attacher = createCSIAttacher(ctx);

  const plugin: CSIPlugin = {
    name: csiPluginName,
    init(h) {
      ctx.init(h);
    },
    canSupport: (spec) => pvSource(spec) !== undefined || inlineSource(spec) !== undefined,
    requiresRemount(spec) {
      const driver = pvSource(spec)?.driver ?? inlineSource(spec)?.driver;
      return driver !== undefined && ctx.csiDriverObject(driver)?.spec?.requiresRepublish === true;
    },
    newMounter: (spec, pod) => new CSIMounter(ctx, attacher, spec, pod),
    newUnmounter: (inner, podUID) => new CSIUnmounter(ctx, attacher, inner, podUID),
    /**
     * kubelet's ConstructVolumeSpec, for a volume podvol has no record of (a
     * node taken over from kubelet): the pod's vol_data.json names the driver
     * and handle, so the volume can be unpublished, unstaged and reported in
     * node.status.volumesInUse while it is mounted (an attachable volume left
     * out of that list could be detached under it).
     */
    async constructVolumeSpec(inner, volumePath) {
      checkSpecName(inner);
      const data = await loadVolumeData(ctx.fs(), volumePath);
      if (!data) {
        throw new VolumeError(
          'ReconstructFailed',
          `kubernetes.io/csi: ${join(volumePath, 'vol_data.json')} not found: cannot reconstruct volume ${inner}`,
        );
      }
      const driver = data[volDataKey.driverName] ?? '';
      const specVolID = data[volDataKey.specVolID] || inner;
      if (data[volDataKey.volumeLifecycleMode] === 'Ephemeral') {
        return { volume: { name: specVolID, csi: { driver } }, readOnly: false };
      }
      return {
        persistentVolume: {
          metadata: { name: specVolID },
          spec: { csi: { driver, volumeHandle: data[volDataKey.volHandle] ?? '' } },
        },
        readOnly: false,
      };
    },
    getDeviceName: deviceNameOf,
    getDeviceMountPath(spec) {
      const pv = pvSource(spec);
      if (!pv) throw new VolumeError('UnknownVolumeSource', 'an inline CSI volume has no device mount path');
      checkDriverName(pv.driver);
      return stagingPath(ctx.pluginDir(), pv.driver, pv.volumeHandle);
    },
    mountDevice: (spec, pod) => attacher.mountDevice(spec, pod),
    unmountDevice: (deviceMountPath) => attacher.unmountDevice(deviceMountPath),
    constructDeviceSpecs: () => attacher.constructDeviceSpecs(),
    phaseOf: (podUID, inner) => ctx.phases.get(`${podUID}/${inner}`),
    /** Online expansion: a published volume grown while its pod runs (kubelet's GenerateExpandInUseVolumeFunc). */
    async nodeExpand(spec, pod) {
      const src = podSourceOf(spec, pod);
      if (src.mode !== 'Persistent') return;
      checkDriverName(src.driver);
      const inner = specName(spec);
      checkSpecName(inner);
      const dir = ctx.podVolumeDir(pod.metadata?.uid ?? '', inner);
      if (!(await loadVolumeData(ctx.fs(), dir))) {
        throw new VolumeError('ExpansionFailed', `volume ${inner} is not published at ${join(dir, 'mount')}`);
      }
      const client = ctx.clientFor(src.driver);
      const caps = await ctx.capabilities(client);
      const globalmount = caps.has('STAGE_UNSTAGE_VOLUME')
        ? stagingPath(ctx.pluginDir(), src.driver, src.handle)
        : '';
      await nodeExpand(ctx, spec, pod, { client, caps, target: join(dir, 'mount'), globalmount });
    },
    cancelCalls: () => ctx.cancelCalls(),
    async volumeStats(podUID, inner) {
      checkSpecName(inner);
      const dir = ctx.podVolumeDir(podUID, inner);
      const data = await loadVolumeData(ctx.fs(), dir);
      if (!data) return undefined;
      const driver = data[volDataKey.driverName] ?? '';
      const handle = data[volDataKey.volHandle] ?? '';
      const client = ctx.clientFor(driver);
      if (!(await ctx.capabilities(client)).has('GET_VOLUME_STATS')) return undefined;
      let res: Awaited<ReturnType<CSIClient['nodeGetVolumeStats']>>;
      try {
        res = await client.nodeGetVolumeStats(handle, join(dir, 'mount'));
      } catch (err) {
        throw rpcError('NodeGetVolumeStats', err);
      }
      const out: VolumeStatsSummary = {
        capacityBytes: 0,
        availableBytes: 0,
        usedBytes: 0,
        inodes: 0,
        inodesFree: 0,
        inodesUsed: 0,
      };
      for (const u of res.usage ?? []) {
        if (u.unit === 'BYTES') {
          out.capacityBytes = Number(u.total);
          out.availableBytes = Number(u.available);
          out.usedBytes = Number(u.used);
        } else if (u.unit === 'INODES') {
          out.inodes = Number(u.total);
          out.inodesFree = Number(u.available);
          out.inodesUsed = Number(u.used);
        }
      }
      return out;
    },
    attachableVolumeName(spec) {
      const pv = pvSource(spec);
      if (!pv || !ctx.attachRequired(pv.driver)) return undefined;
      return uniqueVolumeName(pv.driver, pv.volumeHandle);
    },
  };
  return plugin;
}
