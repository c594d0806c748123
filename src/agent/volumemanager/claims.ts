// The PersistentVolumeClaim half of kubelet's desired-state populator
// (desired_state_of_world_populator.go createVolumeSpec / getPVCExtractPV):
// a pod volume that names a claim (or a generic ephemeral volume, whose claim
// is <pod>-<volume>) becomes the bound PersistentVolume's spec, or a precise
// reason why not. Claims and volumes come from per-object watches; `synced`
// false means the first list has not come back yet.

import type { V1Pod, V1Volume } from '@kubernetes/client-node';
import type { VolumeReason } from '../../reasons.ts';
import { standaloneError } from '../../volumehost/host.ts';
import type { ClaimLookup } from '../../volumehost/kube/claims.ts';
import { type Spec, VolumeError } from '../../volumehost/volume.ts';

/** The claim a pod volume refers to, if any: `persistentVolumeClaim.claimName` or the generic ephemeral `<pod>-<volume>`. */
export function claimNameOf(pod: V1Pod, volume: V1Volume): string | undefined {
  if (volume.persistentVolumeClaim) return volume.persistentVolumeClaim.claimName;
  if (volume.ephemeral) return `${pod.metadata?.name ?? ''}-${volume.name}`;
  return undefined;
}

/** Whether a container uses the volume as a block device (volumeDevices) rather than a mount. */
function usedAsDevice(pod: V1Pod, name: string): boolean {
  const all = [
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.initContainers ?? []),
    ...(pod.spec?.ephemeralContainers ?? []),
  ];
  return all.some((c) => (c.volumeDevices ?? []).some((d) => d.name === name));
}

/**
 * Resolves a claim-backed pod volume to {persistentVolume, readOnly}. Throws a
 * VolumeError whose message is kubelet's ("error processing PVC ns/name: ...").
 */
export function resolveClaimVolume(pod: V1Pod, volume: V1Volume, lookup: ClaimLookup | undefined): Spec {
  const ns = pod.metadata?.namespace ?? 'default';
  const claimName = claimNameOf(pod, volume) ?? '';
  const fail = (reason: VolumeReason, message: string): never => {
    throw new VolumeError(reason, `error processing PVC ${ns}/${claimName}: ${message}`);
  };
  if (!lookup) return fail('StandaloneMode', standaloneError);
  const c = lookup.claim(ns, claimName);
  if (!c.synced) {
    return fail(
      'ClaimLookupPending',
      `failed to fetch PVC from API server: ${c.error ?? 'waiting for the first list of the claim'}`,
    );
  }
  const pvc = c.object;
  if (!pvc) {
    return fail(
      'ClaimNotFound',
      `failed to fetch PVC from API server: persistentvolumeclaims "${claimName}" not found`,
    );
  }
  if (volume.ephemeral) {
    // ephemeral.VolumeIsForPod: the claim must be controlled by this pod.
    const owner = pvc.metadata?.ownerReferences?.find((r) => r.controller === true);
    if (!owner || owner.uid !== pod.metadata?.uid) {
      fail(
        'ClaimNotOwnedByPod',
        `PVC ${ns}/${claimName} was not created for pod ${ns}/${pod.metadata?.name} (pod is not owner)`,
      );
    }
  }
  if (pvc.metadata?.deletionTimestamp) {
    fail('ClaimTerminating', `can't start pod because PVC ${ns}/${claimName} is being deleted`);
  }
  const phase = pvc.status?.phase ?? '';
  const volumeName = pvc.spec?.volumeName ?? '';
  if (phase !== 'Bound' || volumeName === '') {
    fail(
      phase === 'Lost' ? 'ClaimLost' : 'ClaimPending',
      `PVC ${ns}/${claimName} has non-bound phase ("${phase}") or empty pvc.Spec.VolumeName ("${volumeName}")`,
    );
  }
  const v = lookup.volume(volumeName);
  if (!v.synced) {
    return fail(
      'VolumeLookupPending',
      `failed to fetch PV ${volumeName} from API server: ${v.error ?? 'waiting for the first list of the volume'}`,
    );
  }
  const pv = v.object;
  if (!pv) {
    return fail(
      'PersistentVolumeNotFound',
      `failed to fetch PV ${volumeName} from API server: persistentvolumes "${volumeName}" not found`,
    );
  }
  const claimRef = pv.spec?.claimRef;
  if (!claimRef) {
    fail(
      'PersistentVolumeNotBound',
      `found PV object ${volumeName} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`,
    );
  }
  if (claimRef?.uid !== pvc.metadata?.uid) {
    fail(
      'PersistentVolumeClaimMismatch',
      `found PV object ${volumeName} but its pv.Spec.ClaimRef.UID (${claimRef?.uid ?? ''}) does not point to claim.UID (${pvc.metadata?.uid ?? ''})`,
    );
  }
  const mode = pv.spec?.volumeMode ?? 'Filesystem';
  if (usedAsDevice(pod, volume.name)) {
    fail(
      'BlockVolumeNotSupported',
      `volume ${volume.name} is used as a block device (volumeDevices), which podvol does not support`,
    );
  }
  if (mode !== 'Filesystem') {
    fail(
      'VolumeModeMismatch',
      `volume ${volume.name} has volumeMode ${mode}, but is specified in volumeMounts`,
    );
  }
  return { volume, persistentVolume: pv, readOnly: volume.persistentVolumeClaim?.readOnly === true };
}
