// What every part of the CSI plugin reads from a spec, before any driver is
// asked (kubelet's csi_util.go, and csi_client.go's asCSIAccessModeV1): the
// volume source of a PersistentVolume or an inline volume, its readOnly, the
// access mode and fsGroup rules, the checks `podvol plan` runs too, and a
// driver's gRPC error as a VolumeError.
import type {
  V1CSIDriver,
  V1CSIPersistentVolumeSource,
  V1CSIVolumeSource,
  V1Pod,
  V1SecretReference,
} from '@kubernetes/client-node';
import { type Spec, VolumeError, type VolumeErrorStep } from '../../volumehost/volume.ts';
import type { AccessMode, VolumeCapability } from './client.ts';
import { describeGrpcError, isFinalError } from './grpc-status.ts';
import { checkDriverName, ephemeralVolumeHandle } from './vol-data.ts';

export type LifecycleMode = 'Persistent' | 'Ephemeral';

/** Everything SetUp needs from a spec, whichever kind it is. */
export interface Source {
  driver: string;
  handle: string;
  mode: LifecycleMode;
  readOnly: boolean;
  fsType: string;
  mountOptions: string[];
  accessModes: string[];
  attributes: Record<string, string>;
  stageSecretRef?: V1SecretReference;
  publishSecretRef?: V1SecretReference;
}

export function pvSource(spec: Spec): V1CSIPersistentVolumeSource | undefined {
  return spec.persistentVolume?.spec?.csi;
}

export function inlineSource(spec: Spec): V1CSIVolumeSource | undefined {
  return spec.persistentVolume ? undefined : spec.volume?.csi;
}

/**
 * kubelet's NewMounter: a PersistentVolume is read-only only when the pod's
 * claim reference says so (spec.readOnly); the PV's own csi.readOnly is the
 * attach/detach controller's, passed to ControllerPublishVolume, and never
 * reaches NodePublishVolume. An inline volume: its csi.readOnly.
 */
export function readOnlyOf(spec: Spec): boolean {
  if (pvSource(spec)) return spec.readOnly;
  return inlineSource(spec)?.readOnly === true;
}

export function sourceOf(spec: Spec, podUID: string, podNamespace: string): Source {
  const pv = pvSource(spec);
  if (pv) {
    return {
      driver: pv.driver,
      handle: pv.volumeHandle,
      mode: 'Persistent',
      readOnly: readOnlyOf(spec),
      fsType: pv.fsType ?? '',
      mountOptions: spec.persistentVolume?.spec?.mountOptions ?? [],
      accessModes: spec.persistentVolume?.spec?.accessModes ?? [],
      attributes: pv.volumeAttributes ?? {},
      stageSecretRef: pv.nodeStageSecretRef,
      publishSecretRef: pv.nodePublishSecretRef,
    };
  }
  const inline = inlineSource(spec);
  if (!inline) throw new VolumeError('UnknownVolumeSource', 'spec does not reference a CSI volume');
  const ref = inline.nodePublishSecretRef?.name;
  return {
    driver: inline.driver,
    handle: ephemeralVolumeHandle(podUID, spec.volume?.name ?? ''),
    mode: 'Ephemeral',
    readOnly: readOnlyOf(spec),
    fsType: inline.fsType ?? '',
    mountOptions: [],
    accessModes: ['ReadWriteOnce'],
    attributes: inline.volumeAttributes ?? {},
    publishSecretRef: ref ? { name: ref, namespace: podNamespace } : undefined,
  };
}

/** The source of a spec for `pod` (its UID names an inline volume's handle, its namespace the secret's). */
export function podSourceOf(spec: Spec, pod: V1Pod): Source {
  return sourceOf(spec, pod.metadata?.uid ?? '', pod.metadata?.namespace ?? 'default');
}

/** kubelet's asCSIAccessModeV1: the first access mode of the PV (RWO if none). */
export function csiAccessMode(accessModes: string[], singleNodeMultiWriter: boolean): AccessMode {
  switch (accessModes[0] ?? 'ReadWriteOnce') {
    case 'ReadOnlyMany':
      return 'MULTI_NODE_READER_ONLY';
    case 'ReadWriteMany':
      return 'MULTI_NODE_MULTI_WRITER';
    case 'ReadWriteOncePod':
      return singleNodeMultiWriter ? 'SINGLE_NODE_SINGLE_WRITER' : 'SINGLE_NODE_WRITER';
    default:
      return singleNodeMultiWriter ? 'SINGLE_NODE_MULTI_WRITER' : 'SINGLE_NODE_WRITER';
  }
}

/** kubelet's supportsFSGroup: whether kubelet (here podvol) applies fsGroup ownership itself. */
export function supportsFSGroup(
  policy: string,
  fsGroup: number | undefined,
  readOnly: boolean,
  fsType: string,
  accessModes: string[] | undefined,
): boolean {
  if (fsGroup === undefined || policy === 'None' || readOnly) return false;
  if (policy === 'File') return true;
  if (fsType === '') return false;
  return (accessModes ?? []).includes('ReadWriteOnce');
}

/**
 * A CSI gRPC failure as a VolumeError: final (the driver refused) or uncertain
 * (it may still be working). The Event carries the driver's status as it came
 * (`rpc error: code = Internal desc = ...`), as kubelet's does; the log and
 * /status name the call too.
 */
export function rpcError(call: string, err: unknown, step?: VolumeErrorStep): VolumeError {
  const described = describeGrpcError(err);
  const final = isFinalError(err);
  return new VolumeError(final ? 'CSICallFailed' : 'CSICallUncertain', `${call} failed: ${described}`, {
    cause: err,
    step,
    eventMessage: described,
    uncertain: !final,
  });
}

/**
 * SetUp's checks before the driver is asked anything: the driver's name, the
 * volume handle, and that the driver's CSIDriver object allows the volume's
 * lifecycle mode (without one, only Persistent, as kubelet).
 */
export function checkBeforeDriver(
  spec: Spec,
  pod: V1Pod,
  csiDriverObject: (driver: string) => V1CSIDriver | undefined,
): { src: Source; driverObj: V1CSIDriver | undefined } {
  const src = podSourceOf(spec, pod);
  checkDriverName(src.driver);
  if (!src.handle) throw new VolumeError('InvalidVolumeHandle', 'the CSI volume has an empty volumeHandle');
  const driverObj = csiDriverObject(src.driver);
  const modes = driverObj?.spec?.volumeLifecycleModes ?? ['Persistent'];
  if (!driverObj && src.mode === 'Ephemeral') {
    throw new VolumeError(
      'LifecycleModeNotSupported',
      `volume mode "Ephemeral" not supported by driver ${src.driver} (no CSIDriver object)`,
    );
  }
  if (!modes.includes(src.mode)) {
    throw new VolumeError(
      'LifecycleModeNotSupported',
      `volume mode "${src.mode}" not supported by driver ${src.driver} (only supports ${JSON.stringify(modes)})`,
    );
  }
  return { src, driverObj };
}

/** What NodeStageVolume and NodePublishVolume both carry: the volume, its publish context, staging path and capability. */
export function volumeRequest(
  src: Source,
  publishContext: Record<string, string>,
  stagingTargetPath: string,
  capability: VolumeCapability,
) {
  return {
    volume_id: src.handle,
    publish_context: publishContext,
    staging_target_path: stagingTargetPath,
    volume_capability: capability,
  };
}
