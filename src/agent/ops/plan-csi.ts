// The CSI driver of `podvol plan`. A plan runs the real CSI plugin (its
// attacher's MountDevice, its mounter's SetUp and TearDown, UnmountDevice)
// on the daemon's operation path; only the driver is not there. This client
// stands in for every driver: it records each call with its request as a
// `driver` step and answers success without mounting anything, so the
// plugin writes its directories and vol_data.json files into the plan's
// recording filesystem exactly as the daemon would around a real driver.
// Secrets appear only as their key names, volume_context only as its keys
// (it may hold the pod's service account tokens).
import type {
  CSIDriverClient,
  NodeCapability,
  NodeExpandRequest,
  NodePublishRequest,
  NodeStageRequest,
  VolumeCapability,
} from '../../plugins/csi/client.ts';

/** A call the daemon would make to a CSI driver, as the plan reports it. */
export interface DriverStep {
  action: 'driver';
  /** The request's target_path or staging_target_path ('' for a call about no path). */
  path: string;
  /** `<driver> <Method> <request as JSON>`, without any secret value. */
  detail: string;
}

/**
 * A plan cannot ask a driver what it supports, and a CSIDriver object does
 * not say (it has no stage field): the plan assumes a driver that stages, so
 * that a PersistentVolume shows NodeStageVolume at its globalmount before
 * NodePublishVolume. A driver without STAGE_UNSTAGE_VOLUME gets no
 * NodeStage/NodeUnstage and an empty staging_target_path; the staging
 * directory and its vol_data.json are made either way.
 */
export const PLAN_DRIVER_CAPABILITIES: readonly NodeCapability[] = ['STAGE_UNSTAGE_VOLUME'];

const capabilityNote = (caps: readonly NodeCapability[]) =>
  `(assumed: ${caps.length > 0 ? caps.join(', ') : 'none'}; a plan cannot ask the driver)`;

const sortedKeys = (o: Record<string, string> | undefined) => Object.keys(o ?? {}).sort();

function capabilityOf(c: VolumeCapability) {
  return c.block
    ? { block: {}, access_mode: c.access_mode.mode }
    : { mount: c.mount, access_mode: c.access_mode.mode };
}

/** NodeStage and NodePublish requests without values that may be secret. */
function stageSummary(r: NodeStageRequest | NodePublishRequest) {
  return {
    volume_id: r.volume_id,
    staging_target_path: r.staging_target_path,
    ...('target_path' in r ? { target_path: r.target_path, readonly: r.readonly } : {}),
    volume_capability: capabilityOf(r.volume_capability),
    publish_context_keys: sortedKeys(r.publish_context),
    volume_context_keys: sortedKeys(r.volume_context),
    secret_keys: sortedKeys(r.secrets),
  };
}

/** The recording client for `driver`: every call goes to `record`, none to a socket. */
export function recordingDriver(
  driver: string,
  record: (s: DriverStep) => void,
  o: { capabilities?: readonly NodeCapability[]; nodeName?: string } = {},
): CSIDriverClient {
  const caps = o.capabilities ?? PLAN_DRIVER_CAPABILITIES;
  const step = (method: string, path: string, request: object | string) =>
    record({
      action: 'driver',
      path,
      detail: `${driver} ${method} ${typeof request === 'string' ? request : JSON.stringify(request)}`,
    });
  return {
    async getPluginInfo() {
      step('GetPluginInfo', '', '{}');
      return { name: driver, vendor_version: '' };
    },
    async nodeGetInfo() {
      step('NodeGetInfo', '', '{}');
      return { node_id: o.nodeName ?? '', max_volumes_per_node: '0', accessible_topology: null };
    },
    async nodeGetCapabilities() {
      step('NodeGetCapabilities', '', capabilityNote(caps));
      return new Set(caps);
    },
    async nodeStageVolume(req) {
      step('NodeStageVolume', req.staging_target_path, stageSummary(req));
    },
    async nodeUnstageVolume(volumeID, stagingTargetPath) {
      step('NodeUnstageVolume', stagingTargetPath, {
        volume_id: volumeID,
        staging_target_path: stagingTargetPath,
      });
    },
    async nodePublishVolume(req) {
      step('NodePublishVolume', req.target_path, stageSummary(req));
    },
    async nodeUnpublishVolume(volumeID, targetPath) {
      step('NodeUnpublishVolume', targetPath, { volume_id: volumeID, target_path: targetPath });
    },
    async nodeGetVolumeStats(volumeID, volumePath) {
      step('NodeGetVolumeStats', volumePath, { volume_id: volumeID, volume_path: volumePath });
      return { usage: [], volume_condition: null };
    },
    async nodeExpandVolume(req: NodeExpandRequest) {
      step('NodeExpandVolume', req.volume_path, {
        volume_id: req.volume_id,
        volume_path: req.volume_path,
        staging_target_path: req.staging_target_path,
        capacity_range: req.capacity_range,
        secret_keys: sortedKeys(req.secrets),
      });
      return { capacity_bytes: req.capacity_range.required_bytes };
    },
  };
}
