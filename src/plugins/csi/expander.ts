// kubelet's nodeExpander (pkg/volume/util/operationexecutor/node_expander.go)
// with csi_expander.go's NodeExpand: the filesystem of a CSI volume grown on
// the node, during its mount and while its pod runs, with the claim's status
// updated as kubelet does.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import type { Spec } from '../../volumehost/volume.ts';
import { VolumeError } from '../../volumehost/volume.ts';
import { volumeByteSize } from '../util/quantity.ts';
import type { CSIDriverClient, NodeCapability } from './client.ts';
import { type CSIContext, kubeClient } from './csi-context.ts';
import { csiAccessMode, podSourceOf, pvSource, rpcError } from './csi-util.ts';
import { describeGrpcError, grpcCode, isFinalError, Status } from './grpc-status.ts';

/** kubelet's knownResizeConditions: the claim conditions a finished resize clears. */
const resizeConditions: ReadonlySet<string> = new Set([
  'Resizing',
  'FileSystemResizePending',
  'ControllerResizeError',
  'NodeResizeError',
]);

/** Where the volume is: its client and capabilities, the pod's target and the staging path ('' for none). */
export interface ExpandAt {
  client: CSIDriverClient;
  caps: Set<NodeCapability>;
  target: string;
  globalmount: string;
}

/** The claim a PersistentVolume spec was resolved from: the pod's persistentVolumeClaim or generic ephemeral volume. */
function claimOf(spec: Spec, pod: V1Pod): string | undefined {
  if (!spec.persistentVolume) return undefined;
  if (spec.volume?.persistentVolumeClaim) return spec.volume.persistentVolumeClaim.claimName;
  if (spec.volume?.ephemeral) return `${pod.metadata?.name ?? ''}-${spec.volume.name}`;
  return undefined;
}

/**
 * Only when the claim's status.allocatedResourceStatuses.storage is
 * NodeResizePending or NodeResizeInProgress and its status.capacity is below
 * the PersistentVolume's. The claim is marked NodeResizeInProgress, then
 * NodeExpandVolume (required bytes = the PV's capacity, the pod's target and
 * the staging path, the node expand secrets), then the claim's capacity is
 * the PV's, the resize status and resize conditions are cleared and the pod
 * gets a FileSystemResizeSuccessful Event. A final error adds the
 * NodeResizeError condition; FailedPrecondition does not fail the caller
 * (kubelet: expansion must not block the mount); others are retried.
 */
export async function nodeExpand(ctx: CSIContext, spec: Spec, pod: V1Pod, at: ExpandAt): Promise<void> {
  const host = ctx.host();
  const claimName = claimOf(spec, pod);
  const kc = host.getKubeConfig();
  const pv = pvSource(spec);
  const pvName = spec.persistentVolume?.metadata?.name ?? '';
  if (!claimName || !kc || !pv || !at.caps.has('EXPAND_VOLUME')) return;
  const ns = pod.metadata?.namespace ?? 'default';
  const k8s = await kubeClient();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const fail = (what: string, err: unknown): never => {
    throw new VolumeError('ExpansionFailed', `MountVolume.NodeExpandVolume ${what}: ${errorMessage(err)}`);
  };
  const pvc = await core
    .readNamespacedPersistentVolumeClaim({ name: claimName, namespace: ns })
    .catch((err: unknown) => fail(`failed to get PVC ${ns}/${claimName}`, err));
  const resizeStatus = pvc.status?.allocatedResourceStatuses?.storage;
  if (resizeStatus !== 'NodeResizePending' && resizeStatus !== 'NodeResizeInProgress') return;
  // The PersistentVolume as it is now: the controller grew its capacity after the pod resolved it.
  const current = await core
    .readPersistentVolume({ name: pvName })
    .catch((err: unknown) => fail(`failed to get PV ${pvName}`, err));
  const newSize = current.spec?.capacity?.storage;
  if (newSize === undefined) return;
  const newBytes = volumeByteSize(String(newSize), 'capacity');
  const statusSize = pvc.status?.capacity?.storage;
  if (statusSize !== undefined && volumeByteSize(String(statusSize), 'capacity') >= newBytes) return;
  const patch = (body: object) =>
    core.patchNamespacedPersistentVolumeClaimStatus(
      { name: claimName, namespace: ns, body },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  let rv = pvc.metadata?.resourceVersion;
  if (resizeStatus !== 'NodeResizeInProgress') {
    // kubelet's MarkNodeExpansionInProgress, with its resourceVersion check.
    const marked = await patch({
      metadata: { resourceVersion: rv },
      status: { allocatedResourceStatuses: { storage: 'NodeResizeInProgress' } },
    }).catch((err: unknown) => fail('failed to mark node expansion in progress', err));
    rv = marked.metadata?.resourceVersion;
  }
  const src = podSourceOf(spec, pod);
  const secrets = await ctx.secretData(pv.nodeExpandSecretRef);
  try {
    await at.client.nodeExpandVolume({
      volume_id: src.handle,
      volume_path: at.target,
      capacity_range: { required_bytes: String(newBytes), limit_bytes: '0' },
      staging_target_path: at.globalmount,
      // csiClient.NodeExpandVolume: fsType, mount flags and access mode; no mount group.
      volume_capability: {
        mount: { fs_type: src.fsType, mount_flags: src.mountOptions, volume_mount_group: '' },
        access_mode: { mode: csiAccessMode(src.accessModes, at.caps.has('SINGLE_NODE_MULTI_WRITER')) },
      },
      secrets,
    });
  } catch (err) {
    if (isFinalError(err)) {
      // kubelet's MarkNodeExpansionFailedCondition: the other conditions stay.
      const conditions = (pvc.status?.conditions ?? []).filter((c) => c.type !== 'NodeResizeError');
      conditions.push({
        type: 'NodeResizeError',
        status: 'True',
        lastTransitionTime: new Date(Math.floor(ctx.clock.now() / 1000) * 1000),
        message: `failed to expand pvc with ${describeGrpcError(err)}`,
      });
      await patch({ status: { conditions } }).catch(() => {});
    }
    if (grpcCode(err) === Status.FAILED_PRECONDITION) return;
    throw rpcError('NodeExpandVolume', err);
  }
  host
    .getEventRecorder()
    .eventf(
      pod,
      'Normal',
      'FileSystemResizeSuccessful',
      `MountVolume.NodeExpandVolume succeeded for volume "${pvName}" ${host.getNodeName()}`,
    );
  // kubelet's MarkFSResizeFinished: capacity, the storage resize status gone, resize conditions gone.
  const others = Object.keys(pvc.status?.allocatedResourceStatuses ?? {}).filter((k) => k !== 'storage');
  const conditions = pvc.status?.conditions ?? [];
  const kept = conditions.filter((c) => !resizeConditions.has(c.type));
  await patch({
    metadata: { resourceVersion: rv },
    status: {
      capacity: { storage: String(newSize) },
      allocatedResourceStatuses: others.length > 0 ? { storage: null } : null,
      ...(kept.length !== conditions.length ? { conditions: kept.length > 0 ? kept : null } : {}),
    },
  }).catch((err: unknown) => fail('update pvc status failed', err));
}
