// kubernetes.io/csi (kubelet's pkg/volume/csi): PersistentVolumes with a csi
// source and inline ephemeral CSI volumes, driven over gRPC through the
// driver that registered under <root>/plugins_registry.
//
// One SetUp does kubelet's WaitForAttach + MountDevice (NodeStageVolume,
// once per volume and node, serialised per volume) + SetUp (NodePublishVolume);
// TearDown does NodeUnpublishVolume and, when no pod directory refers to
// the volume any more, NodeUnstageVolume. Which pods use a staged volume is
// kept in memory (volume-index.ts), read from the vol_data.json files at
// start, so the same answer holds after a restart.
import { mkdir, rm, rmdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type {
  StorageV1Api,
  V1CSIDriver,
  V1CSIPersistentVolumeSource,
  V1CSIVolumeSource,
  V1Pod,
  V1SecretReference,
} from '@kubernetes/client-node';
import { errorMessage, fieldOf } from '../../errno.ts';
import { escapeQualifiedName } from '../../volumehost/paths.ts';
import { hostSELinuxEnabled } from '../../volumehost/selinux-host.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import {
  type Attributes,
  type Mounter,
  type MounterArgs,
  type NodeExpandableVolumePlugin,
  type Spec,
  specName,
  type Unmounter,
  VolumeError,
  type VolumeErrorStep,
} from '../../volumehost/volume.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { volumeByteSize } from '../util/quantity.ts';
import { addSELinuxMountOption, mountSELinuxLabel } from '../util/selinux.ts';
import { setVolumeOwnership } from '../volume-ownership.ts';
import { type AccessMode, CSIClient, type NodeCapability, type VolumeCapability } from './client.ts';
import type { DriversStore } from './drivers.ts';
import { goString } from './gojson.ts';
import type { CSIProto } from './grpc.ts';
import {
  type CSIProtoSource,
  describeGrpcError,
  grpcCode,
  isFinalError,
  lazyCSIProto,
  Status,
} from './grpc-status.ts';
import { WAIT_FOR_ATTACH_TIMEOUT_MS } from './timeouts.ts';
import {
  attachmentName,
  checkDriverName,
  checkSpecName,
  csiPluginName,
  ephemeralVolumeHandle,
  loadVolumeData,
  saveVolumeData,
  stagingDataDir,
  stagingPath,
  uniqueVolumeName,
  volDataKey,
} from './vol-data.ts';
import { VolumeIndex } from './volume-index.ts';

/**
 * The Kubernetes client is loaded only when an API call is made (cluster mode):
 * loading it costs a standalone podvol about 80 MiB and seconds of start-up.
 */
const kubeClient = () => import('@kubernetes/client-node');

export { csiPluginName };

const escapedName = escapeQualifiedName(csiPluginName);

/** kubelet's knownResizeConditions: the claim conditions a finished resize clears. */
const resizeConditions = new Set([
  'Resizing',
  'FileSystemResizePending',
  'ControllerResizeError',
  'NodeResizeError',
]);

export interface CSIPluginOptions {
  drivers: DriversStore;
  /** Default: loaded (with gRPC) at the first CSI call. */
  proto?: CSIProto | CSIProtoSource;
  /** Per-call deadline; kubelet's is 2 minutes. */
  timeoutMs?: number;
  /**
   * How long a volume waits for its VolumeAttachment to be attached before the
   * wait fails with an Event (kubelet's waitForAttachTimeout, 10 minutes).
   */
  waitForAttachTimeoutMs?: number;
  /**
   * The unique names this node has reported in node.status.volumesInUse. An
   * attachable volume is used only once it is there (kubelet's ReportedInUse).
   */
  volumesReportedInUse?: () => ReadonlySet<string>;
  /** csi_operations_seconds, per driver. */
  observe?: (driver: string, method: string, code: string, seconds: number) => void;
  /**
   * The specs the desired state of the world wants mounted now. A volume one
   * of them names is not unstaged even when no pod has it published yet, as
   * kubelet's reconciler unmounts a device only once the desired state no
   * longer has the volume (a pod about to mount it would stage it again).
   */
  desiredVolumes?: () => Iterable<Spec | undefined>;
  /**
   * Whether the host has SELinux enabled (kubelet's SELinuxLabelTranslator
   * SELinuxEnabled: go-selinux's GetEnabled). Default: read from the host
   * once. Without it nothing SELinux-specific is done, as in kubelet; tests
   * force it on to see what a driver on an SELinux host receives.
   */
  seLinuxEnabled?: () => boolean;
  /**
   * kubelet's SELinuxMount feature gate (beta, off by default): mount every
   * PersistentVolume with the pod's SELinux context, not only
   * ReadWriteOncePod ones. Default false.
   */
  seLinuxMountFeature?: boolean;
}

type LifecycleMode = 'Persistent' | 'Ephemeral';

/** Everything SetUp needs from a spec, whichever kind it is. */
interface Source {
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

function pvSource(spec: Spec): V1CSIPersistentVolumeSource | undefined {
  return spec.persistentVolume?.spec?.csi;
}

function inlineSource(spec: Spec): V1CSIVolumeSource | undefined {
  return spec.persistentVolume ? undefined : spec.volume?.csi;
}

/**
 * kubelet's NewMounter: a PersistentVolume is read-only only when the pod's
 * claim reference says so (spec.readOnly); the PV's own csi.readOnly is the
 * attach/detach controller's, passed to ControllerPublishVolume, and never
 * reaches NodePublishVolume. An inline volume: its csi.readOnly.
 */
function readOnlyOf(spec: Spec): boolean {
  if (pvSource(spec)) return spec.readOnly;
  return inlineSource(spec)?.readOnly === true;
}

function sourceOf(spec: Spec, podUID: string, podNamespace: string): Source {
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
function rpcError(call: string, err: unknown, step?: VolumeErrorStep): VolumeError {
  const described = describeGrpcError(err);
  return new VolumeError(
    isFinalError(err) ? 'CSICallFailed' : 'CSICallUncertain',
    `${call} failed: ${described}`,
    {
      cause: err,
      step,
      eventMessage: described,
    },
  );
}

/** What SetUp knows of a CSI volume before it asks the driver anything. */
export interface CSIVolumeSummary {
  driver: string;
  handle: string;
  /** 'Persistent' (a PersistentVolume) or 'Ephemeral' (inline in the pod). */
  mode: string;
  /** Whether NodeStageVolume may come first (a persistent volume; the driver's capability decides). */
  mayStage: boolean;
}

/**
 * SetUp's checks before the driver is asked anything: the driver's name, the
 * volume handle, and that the driver's CSIDriver object allows the volume's
 * lifecycle mode (without one, only Persistent, as kubelet). `podvol plan`
 * runs exactly these, then stops: the rest is the driver's.
 */
function checkBeforeDriver(
  spec: Spec,
  pod: V1Pod,
  csiDriverObject: (driver: string) => V1CSIDriver | undefined,
): { src: Source; driverObj: V1CSIDriver | undefined } {
  const src = sourceOf(spec, pod.metadata?.uid ?? '', pod.metadata?.namespace ?? 'default');
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

/** checkBeforeDriver for `podvol plan`: what it can say of a CSI volume without its driver. */
export function checkCSIVolumeWithoutDriver(
  spec: Spec,
  pod: V1Pod,
  csiDriverObject: (driver: string) => V1CSIDriver | undefined,
): CSIVolumeSummary {
  const { src } = checkBeforeDriver(spec, pod, csiDriverObject);
  return { driver: src.driver, handle: src.handle, mode: src.mode, mayStage: src.mode === 'Persistent' };
}

/** What NodeStageVolume and NodePublishVolume both carry: the volume, its publish context, staging path and capability. */
function volumeRequest(
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

export interface VolumeStatsSummary {
  capacityBytes: number;
  availableBytes: number;
  usedBytes: number;
  inodes: number;
  inodesFree: number;
  inodesUsed: number;
}

export interface CSIPlugin extends NodeExpandableVolumePlugin {
  /**
   * Unstages staged volumes that no pod directory refers to (kubelet leaks
   * them); returns the unique names unstaged. Also the retry of a
   * NodeUnstageVolume that failed in a TearDown. Every volume is tried: one
   * that fails goes to `onError` (without it, the first error is thrown once
   * the others were tried).
   */
  cleanupOrphanedStagedVolumes(onError?: (volume: string, err: unknown) => void): Promise<string[]>;
  /**
   * The unique names of the attachable volumes that are (or may be) staged on
   * this node: every staging vol_data.json, written before NodeStageVolume and
   * removed only once NodeUnstageVolume (or, without STAGE_UNSTAGE_VOLUME, the
   * cleanup) succeeded, so an uncertain stage and a failed unstage are in it.
   * kubelet keeps such a device in its actual state, and so in
   * node.status.volumesInUse, until UnmountDevice succeeds: the attach/detach
   * controller must not detach a disk still mounted at globalmount.
   */
  stagedAttachableVolumes(): Promise<string[]>;
  /**
   * NodeGetVolumeStats of a published volume when the driver has GET_VOLUME_STATS
   * (undefined otherwise): bytes and inodes as kubelet's metrics report them.
   */
  volumeStats(podUID: string, innerName: string): Promise<VolumeStatsSummary | undefined>;
  /** kubernetes.io/csi/<driver>^<handle> when the spec needs attaching (kubelet's CanAttach), else undefined. */
  attachableVolumeName(spec: Spec): string | undefined;
  /** The phase a volume is in while its SetUp runs (attaching, staging, publishing), for /status. */
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
  let host: VolumeHost;
  const proto = o.proto ?? lazyCSIProto();
  const deviceLock = new KeyedMutex();
  /** Staged devices known in this process; anything else is staged (again) on the next SetUp. */
  const staged = new Set<string>();
  const phases = new Map<string, string>();
  /**
   * When each pod volume (<pod UID>/<volume>) first found its VolumeAttachment
   * not attached. kubelet's WaitForAttach blocks one mount operation for up to
   * waitForAttachTimeout; podvol looks once per retry instead, so the wait's
   * start is kept across retries until it ends (attached, failed or timed out).
   */
  const attachWaitSince = new Map<string, number>();
  const waitForAttachTimeoutMs = o.waitForAttachTimeoutMs ?? WAIT_FOR_ATTACH_TIMEOUT_MS;
  const shutdown = new AbortController();
  /** Calls in flight, for the shutdown log. */
  let inFlight = 0;

  let hostSELinux: boolean | undefined;
  const seLinuxEnabled = o.seLinuxEnabled ?? (() => (hostSELinux ??= hostSELinuxEnabled()));

  const pluginDir = () => host.getPluginDir(csiPluginName);
  const index = new VolumeIndex(() => ({ podsDir: host.getPodsDir(), pluginDir: pluginDir() }));
  const podVolumeDir = (podUID: string, inner: string) => host.getPodVolumeDir(podUID, escapedName, inner);
  const kubeConfig = () => host.getKubeConfig();

  function clientFor(driver: string): CSIClient {
    const d = o.drivers.get(driver);
    if (!d) {
      throw new VolumeError(
        'DriverNotRegistered',
        `kubernetes.io/csi: failed to get CSI client: driver name ${driver} not found in the list of registered CSI drivers`,
      );
    }
    const observe = o.observe;
    return new CSIClient(proto, d.endpoint, {
      timeoutMs: o.timeoutMs,
      signal: shutdown.signal,
      observe: (method, code, seconds) => {
        inFlight--;
        observe?.(driver, method, code, seconds);
      },
      onStart: () => {
        inFlight++;
      },
    });
  }

  async function capabilities(client: CSIClient): Promise<Set<NodeCapability>> {
    try {
      return await client.nodeGetCapabilities();
    } catch (err) {
      throw rpcError('NodeGetCapabilities', err);
    }
  }

  function csiDriverObject(driver: string): V1CSIDriver | undefined {
    return host.csiDriverLister()?.get(driver);
  }

  /** kubelet's CanAttach: attach is required unless the driver's CSIDriver object says attachRequired: false. */
  function attachRequired(driver: string): boolean {
    return csiDriverObject(driver)?.spec?.attachRequired !== false;
  }

  async function secretData(ref: V1SecretReference | undefined): Promise<Record<string, string>> {
    if (!ref?.name) return {};
    const kc = kubeConfig();
    if (!kc)
      throw new VolumeError(
        'StandaloneMode',
        'CSI secrets need the API server (podvol runs in standalone mode)',
      );
    const ns = ref.namespace ?? 'default';
    try {
      const s = await kc
        .makeApiClient((await kubeClient()).CoreV1Api)
        .readNamespacedSecret({ name: ref.name, namespace: ns });
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
      return out;
    } catch (err) {
      throw new VolumeError('SecretNotFound', `failed to get secret ${ns}/${ref.name}: ${errorMessage(err)}`);
    }
  }

  /**
   * kubelet's VerifyControllerAttachedVolume, WaitForAttach and
   * getPublishContext: one look at the node and the VolumeAttachment per
   * retry, never a poll. As in kubelet, nothing waiting here posts an Event
   * (reason AttachPending) until the VolumeAttachment has not been attached
   * for the attach wait's timeout, counted from the first look at it; then one
   * `MountVolume.WaitForAttach failed` Event (AttachTimedOut) and a new wait.
   * An attach error or a VolumeAttachment being deleted fails the wait at
   * once, with an Event.
   */
  async function publishContext(
    src: Source,
    driverObj: V1CSIDriver | undefined,
    waitKey: string,
  ): Promise<Record<string, string>> {
    if (driverObj?.spec?.attachRequired === false || src.mode === 'Ephemeral') return {};
    const kc = kubeConfig();
    if (!kc) {
      throw new VolumeError(
        'AttachRequired',
        `driver ${src.driver} requires attach (no CSIDriver says attachRequired: false) and podvol runs in standalone mode`,
      );
    }
    const node = host.getNodeName();
    const unique = uniqueVolumeName(src.driver, src.handle);
    if (!o.volumesReportedInUse?.().has(unique)) {
      throw new VolumeError(
        'AttachPending',
        `volume ${unique} has not been added to the list of VolumesInUse in the node's volume status`,
      );
    }
    try {
      const n = await kc.makeApiClient((await kubeClient()).CoreV1Api).readNode({ name: node });
      if (!(n.status?.volumesAttached ?? []).some((v) => v.name === unique)) {
        throw new VolumeError(
          'AttachPending',
          `volume ${unique} has not yet been added to the list of VolumesAttached for node ${node}`,
        );
      }
    } catch (err) {
      if (err instanceof VolumeError) throw err;
      throw new VolumeError('AttachPending', `failed to read node ${node}: ${errorMessage(err)}`);
    }
    // From here on it is kubelet's WaitForAttach, with its timeout.
    const since = attachWaitSince.get(waitKey) ?? Date.now();
    attachWaitSince.set(waitKey, since);
    const failWait = (message: string, eventMessage: string, cause?: unknown): never => {
      attachWaitSince.delete(waitKey);
      throw new VolumeError('AttachFailed', message, { cause, step: 'WaitForAttach', eventMessage });
    };
    const notYet = (message: string): never => {
      if (Date.now() - since < waitForAttachTimeoutMs) throw new VolumeError('AttachPending', message);
      attachWaitSince.delete(waitKey);
      // csi_attacher's waitForVolumeAttachDetachStatusWithLister, word for word.
      const timedOut = `timed out waiting for external-attacher of ${src.driver} CSI driver to attach volume ${src.handle}`;
      throw new VolumeError('AttachTimedOut', `${timedOut} (${message})`, {
        step: 'WaitForAttach',
        eventMessage: timedOut,
      });
    };
    const name = attachmentName(src.handle, src.driver, node);
    let va: Awaited<ReturnType<StorageV1Api['readVolumeAttachment']>>;
    try {
      va = await kc.makeApiClient((await kubeClient()).StorageV1Api).readVolumeAttachment({ name });
    } catch (err) {
      // kubelet's lister: not found yet is still waiting; any other error ends the wait.
      if (fieldOf(err, 'code') === 404) return notYet(`volume attachment ${name} does not exist yet`);
      return failWait(
        `volume attachment ${name} is not available: ${errorMessage(err)}`,
        errorMessage(err),
        err,
      );
    }
    if (va.metadata?.deletionTimestamp) {
      return failWait(`volume attachment ${name} is being deleted`, 'volume attachment is being deleted');
    }
    const attachErr = va.status?.attachError?.message;
    if (attachErr) return failWait(`attachment ${name} has error: ${attachErr}`, attachErr);
    if (!va.status?.attached) return notYet(`volume ${src.handle} is not attached yet (${name})`);
    attachWaitSince.delete(waitKey);
    return va.status.attachmentMetadata ?? {};
  }

  /**
   * kubelet's removeMountDir: the mount directory (if nothing is mounted there),
   * its vol_data.json, the directory. rmdir itself is the mount check: the
   * kernel refuses to remove a mount point (EBUSY), with no window between a
   * look at the mount table and the removal, and never removes contents.
   */
  async function removeMountDir(dir: string, mountDir: string): Promise<void> {
    await rmdir(mountDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EBUSY') {
        throw new VolumeError('StillMounted', `${mountDir} is still mounted; not removing it`);
      }
      if (err.code !== 'ENOENT') throw err;
    });
    await rm(join(dir, 'vol_data.json'), { force: true });
    await rmdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /** A pod's publication is gone: its mount directory, its json and its entry in the index. */
  async function removePublishDir(dir: string, target: string): Promise<void> {
    await removeMountDir(dir, target);
    index.removeUser(dir);
  }

  async function removeStagingDir(driver: string, handle: string): Promise<void> {
    await removeMountDir(
      stagingDataDir(pluginDir(), driver, handle),
      stagingPath(pluginDir(), driver, handle),
    );
    index.removeStaged(driver, handle);
  }

  /** Whether a pod the desired state has wants this persistent volume (published or not yet). */
  function desired(driver: string, handle: string): boolean {
    for (const spec of o.desiredVolumes?.() ?? []) {
      const pv = spec && pvSource(spec);
      if (pv?.driver === driver && pv.volumeHandle === handle) return true;
    }
    return false;
  }

  /**
   * NodeUnstageVolume when no pod uses the volume and the desired state no
   * longer wants it, then globalmount and its json go. Holds the device lock.
   * A volume kept staged here is unstaged by the housekeeping sweep
   * (cleanupOrphanedStagedVolumes) once nothing wants it.
   */
  async function unstageIfUnused(driver: string, handle: string): Promise<boolean> {
    const key = uniqueVolumeName(driver, handle);
    await index.load();
    return deviceLock.run(key, async () => {
      if ((await index.users(driver, handle)).length > 0 || desired(driver, handle)) return false;
      const dataDir = stagingDataDir(pluginDir(), driver, handle);
      const data = await loadVolumeData(dataDir);
      if (!data) {
        staged.delete(key);
        index.removeStaged(driver, handle);
        return false;
      }
      const client = clientFor(driver);
      const caps = await capabilities(client);
      const globalmount = stagingPath(pluginDir(), driver, handle);
      if (caps.has('STAGE_UNSTAGE_VOLUME')) {
        try {
          await client.nodeUnstageVolume(handle, globalmount);
        } catch (err) {
          throw rpcError('NodeUnstageVolume', err);
        }
      }
      staged.delete(key);
      await removeStagingDir(driver, handle);
      return true;
    });
  }

  /** The claim a PersistentVolume spec was resolved from: the pod's persistentVolumeClaim or generic ephemeral volume. */
  function claimOf(spec: Spec, pod: V1Pod): string | undefined {
    if (!spec.persistentVolume) return undefined;
    if (spec.volume?.persistentVolumeClaim) return spec.volume.persistentVolumeClaim.claimName;
    if (spec.volume?.ephemeral) return `${pod.metadata?.name ?? ''}-${spec.volume.name}`;
    return undefined;
  }

  /**
   * kubelet's nodeExpander (operationexecutor/node_expander.go), during mount
   * and for a volume mounted while its pod runs: only when the claim's
   * status.allocatedResourceStatuses.storage is NodeResizePending or
   * NodeResizeInProgress and its status.capacity is below the
   * PersistentVolume's. The claim is marked NodeResizeInProgress, then
   * NodeExpandVolume (required bytes = the PV's capacity, the pod's target and
   * the staging path, the node expand secrets), then the claim's capacity is
   * the PV's, the resize status and resize conditions are cleared and the pod
   * gets a FileSystemResizeSuccessful Event. A final error adds the
   * NodeResizeError condition; FailedPrecondition does not fail the caller
   * (kubelet: expansion must not block the mount); others are retried.
   */
  async function nodeExpand(
    spec: Spec,
    pod: V1Pod,
    at: { client: CSIClient; caps: Set<NodeCapability>; target: string; globalmount: string },
  ): Promise<void> {
    const claimName = claimOf(spec, pod);
    const kc = kubeConfig();
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
    const src = sourceOf(spec, pod.metadata?.uid ?? '', ns);
    const secrets = await secretData(pv.nodeExpandSecretRef);
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
          lastTransitionTime: new Date(Math.floor(Date.now() / 1000) * 1000),
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

  class CSIMounter implements Mounter {
    readonly #spec: Spec;
    readonly #pod: V1Pod;
    readonly #uid: string;
    readonly #inner: string;

    constructor(spec: Spec, pod: V1Pod) {
      this.#spec = spec;
      this.#pod = pod;
      this.#uid = pod.metadata?.uid ?? '';
      this.#inner = specName(spec);
      checkSpecName(this.#inner);
    }

    getPath(): string {
      return join(podVolumeDir(this.#uid, this.#inner), 'mount');
    }

    /**
     * kubelet's needSELinuxRelabel: a volume mounted with `-o context` already
     * carries the pod's label, so the runtime must not relabel it; otherwise
     * it relabels when the host has SELinux (kubelet also asks whether the
     * mount supports labels; podvol, which runs no containers, has no runtime
     * to tell). False until SetUp ran.
     */
    #needSELinuxRelabel = false;

    getAttributes(): Attributes {
      // kubelet's GetAttributes: the mounter's readOnly, the one NodePublishVolume got.
      const readOnly = readOnlyOf(this.#spec);
      return { readOnly, managed: !readOnly, selinuxRelabel: this.#needSELinuxRelabel };
    }

    setUp(args: MounterArgs): Promise<void> {
      return this.setUpAt(this.getPath(), args);
    }

    async setUpAt(target: string, args: MounterArgs): Promise<void> {
      const phaseKey = `${this.#uid}/${this.#inner}`;
      try {
        await this.#setUpAt(target, args, (p) => phases.set(phaseKey, p));
      } finally {
        phases.delete(phaseKey);
      }
    }

    async #setUpAt(target: string, args: MounterArgs, phase: (p: string) => void): Promise<void> {
      await index.load();
      const pod = this.#pod;
      const ns = pod.metadata?.namespace ?? 'default';
      const { src, driverObj } = checkBeforeDriver(this.#spec, pod, csiDriverObject);
      const client = clientFor(src.driver);
      const caps = await capabilities(client);
      const accessMode = csiAccessMode(src.accessModes, caps.has('SINGLE_NODE_MULTI_WRITER'));
      const mountGroup =
        caps.has('VOLUME_MOUNT_GROUP') && args.fsGroup !== undefined ? String(args.fsGroup) : '';
      // kubelet's SupportsSELinuxContextMount (the CSIDriver's seLinuxMount) and
      // the desired state's label: the same context for NodeStage and NodePublish.
      const seLinuxLabel = mountSELinuxLabel(this.#spec, pod, {
        seLinuxEnabled: seLinuxEnabled(),
        pluginSupportsSELinuxContextMount: driverObj?.spec?.seLinuxMount === true,
        seLinuxMountGate: o.seLinuxMountFeature === true,
      });
      const mountFlags =
        seLinuxLabel === '' ? src.mountOptions : addSELinuxMountOption(src.mountOptions, seLinuxLabel);
      const seLinuxData: Record<string, string> =
        seLinuxLabel === '' ? {} : { [volDataKey.seLinuxMountContext]: seLinuxLabel };
      const capability: VolumeCapability = {
        mount: { fs_type: src.fsType, mount_flags: mountFlags, volume_mount_group: mountGroup },
        access_mode: { mode: accessMode },
      };
      const node = host.getNodeName();
      const unique = uniqueVolumeName(src.driver, src.handle);
      const dir = dirname(target);
      let pubCtx: Record<string, string> = {};
      let globalmount = '';

      // Stage (and record this pod's use) under the device lock, so a teardown of
      // another pod never unstages between our NodeStage and our vol_data.json.
      await deviceLock.run(unique, async () => {
        if (src.mode === 'Persistent') {
          phase('attaching');
          pubCtx = await publishContext(src, driverObj, `${this.#uid}/${this.#inner}`);
          globalmount = stagingPath(pluginDir(), src.driver, src.handle);
          if (!staged.has(unique)) {
            phase('staging');
            await this.#stage(client, src, caps, capability, pubCtx, seLinuxData);
            staged.add(unique);
          }
          if (!caps.has('STAGE_UNSTAGE_VOLUME')) globalmount = '';
        }
        await mkdir(dir, { recursive: true, mode: 0o750 });
        await saveVolumeData(dir, {
          [volDataKey.specVolID]: this.#inner,
          [volDataKey.volHandle]: src.handle,
          [volDataKey.driverName]: src.driver,
          [volDataKey.nodeName]: node,
          [volDataKey.attachmentID]: attachmentName(src.handle, src.driver, node),
          [volDataKey.volumeLifecycleMode]: src.mode,
          ...seLinuxData,
        });
        index.addUser(dir, src.driver, src.handle);
      });

      phase('publishing');
      const volumeContext: Record<string, string> = { ...src.attributes };
      const secrets = await secretData(src.publishSecretRef);
      if (driverObj?.spec?.podInfoOnMount === true) {
        volumeContext['csi.storage.k8s.io/pod.name'] = pod.metadata?.name ?? '';
        volumeContext['csi.storage.k8s.io/pod.namespace'] = ns;
        volumeContext['csi.storage.k8s.io/pod.uid'] = this.#uid;
        volumeContext['csi.storage.k8s.io/serviceAccount.name'] = pod.spec?.serviceAccountName ?? '';
        volumeContext['csi.storage.k8s.io/ephemeral'] = String(src.mode === 'Ephemeral');
      }
      const tokens = await this.#tokens(driverObj);
      if (tokens !== undefined) {
        if (driverObj?.spec?.serviceAccountTokenInSecrets === true) {
          secrets['csi.storage.k8s.io/serviceAccount.tokens'] = tokens;
        } else {
          volumeContext['csi.storage.k8s.io/serviceAccount.tokens'] = tokens;
        }
      }
      try {
        await client.nodePublishVolume({
          ...volumeRequest(src, pubCtx, globalmount, capability),
          target_path: target,
          readonly: src.readOnly,
          secrets,
          volume_context: volumeContext,
        });
      } catch (err) {
        const e = rpcError('NodePublishVolume', err);
        // The driver finished and refused: nothing is mounted, so the directory and its json go.
        if (isFinalError(err)) await removePublishDir(dir, target).catch(() => {});
        throw e;
      }
      this.#needSELinuxRelabel = seLinuxLabel === '' && seLinuxEnabled();
      await nodeExpand(this.#spec, pod, { client, caps, target, globalmount });
      const policy = driverObj?.spec?.fsGroupPolicy ?? 'ReadWriteOnceWithFSType';
      const accessModes = src.mode === 'Ephemeral' ? ['ReadWriteOnce'] : src.accessModes;
      const fsGroup = args.fsGroup;
      if (
        fsGroup !== undefined &&
        !caps.has('VOLUME_MOUNT_GROUP') &&
        supportsFSGroup(policy, fsGroup, src.readOnly, src.fsType, accessModes)
      ) {
        try {
          await setVolumeOwnership(target, fsGroup, {
            readOnly: src.readOnly,
            fsGroupChangePolicy: args.fsGroupChangePolicy,
          });
        } catch (err) {
          throw new VolumeError('FSGroupFailed', `applying fsGroup ${args.fsGroup}: ${errorMessage(err)}`);
        }
      }
    }

    /**
     * kubelet's MountDevice: globalmount (0750) and the staging json first (with
     * seLinuxMountContext when mounted with one), even without STAGE_UNSTAGE
     * (UnmountDevice reads the json and removes both), then NodeStageVolume.
     */
    async #stage(
      client: CSIClient,
      src: Source,
      caps: Set<NodeCapability>,
      capability: VolumeCapability,
      pubCtx: Record<string, string>,
      seLinuxData: Record<string, string>,
    ): Promise<void> {
      const dataDir = stagingDataDir(pluginDir(), src.driver, src.handle);
      const globalmount = join(dataDir, 'globalmount');
      await mkdir(globalmount, { recursive: true, mode: 0o750 });
      await saveVolumeData(dataDir, {
        [volDataKey.volHandle]: src.handle,
        [volDataKey.driverName]: src.driver,
        ...seLinuxData,
      });
      index.addStaged(src.driver, src.handle);
      if (!caps.has('STAGE_UNSTAGE_VOLUME')) return;
      const secrets = await secretData(src.stageSecretRef);
      try {
        await client.nodeStageVolume({
          ...volumeRequest(src, pubCtx, globalmount, capability),
          secrets,
          volume_context: src.attributes,
        });
      } catch (err) {
        // Final: nothing is staged, remove what we made. Uncertain: keep it, so a teardown unstages.
        if (isFinalError(err)) await removeStagingDir(src.driver, src.handle).catch(() => {});
        throw rpcError('NodeStageVolume', err, 'MountDevice');
      }
    }

    /** csi.storage.k8s.io/serviceAccount.tokens: one TokenRequest per audience, bound to the pod. */
    async #tokens(driverObj: V1CSIDriver | undefined): Promise<string | undefined> {
      const requests = driverObj?.spec?.tokenRequests ?? [];
      if (requests.length === 0) return undefined;
      const pod = this.#pod;
      const out: Record<string, { token: string; expirationTimestamp: string }> = {};
      for (const r of requests) {
        const audience = r.audience ?? '';
        const tr = await host
          .getServiceAccountTokenFunc()(
            pod.metadata?.namespace ?? 'default',
            pod.spec?.serviceAccountName || 'default',
            {
              spec: {
                audiences: audience === '' ? [] : [audience],
                expirationSeconds: r.expirationSeconds,
                boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: this.#uid },
              },
            },
          )
          .catch((err: unknown) => {
            throw new VolumeError(
              'TokenRequestFailed',
              `failed to request token for audience "${audience}": ${errorMessage(err)}`,
            );
          });
        // client-node declares a Date; what a server sent may still be its RFC 3339 string.
        const exp: unknown = tr.status?.expirationTimestamp;
        out[audience] = {
          token: tr.status?.token ?? '',
          expirationTimestamp:
            exp instanceof Date ? exp.toISOString().replace(/\.\d{3}Z$/, 'Z') : String(exp ?? ''),
        };
      }
      // json.Marshal(map[string]TokenRequestStatus): sorted audiences, token before expirationTimestamp.
      const entries = Object.entries(out).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      const inner = entries.map(
        ([k, s]) =>
          `${goString(k)}:{"token":${goString(s.token)},"expirationTimestamp":${goString(s.expirationTimestamp)}}`,
      );
      return `{${inner.join(',')}}`;
    }
  }

  class CSIUnmounter implements Unmounter {
    readonly #uid: string;
    readonly #inner: string;
    constructor(inner: string, podUID: string) {
      checkSpecName(inner);
      this.#inner = inner;
      this.#uid = podUID;
    }

    getPath(): string {
      return join(podVolumeDir(this.#uid, this.#inner), 'mount');
    }

    tearDown(): Promise<void> {
      return this.tearDownAt(this.getPath());
    }

    async tearDownAt(target: string): Promise<void> {
      // A wait for attachment ends with the pod's volume.
      attachWaitSince.delete(`${this.#uid}/${this.#inner}`);
      await index.load();
      const dir = dirname(target);
      const data = await loadVolumeData(dir);
      if (!data) {
        index.removeUser(dir);
        // Nothing was published (or a final error already cleaned up): only an empty directory can be left.
        if (
          await host
            .getMounter()
            .isMountPoint(target)
            .catch(() => false)
        ) {
          throw new VolumeError('StillMounted', `${target} is mounted but has no ${dir}/vol_data.json`);
        }
        await rmdir(target).catch(() => {});
        await rmdir(dir).catch(() => {});
        return;
      }
      const driver = data[volDataKey.driverName] ?? '';
      const handle = data[volDataKey.volHandle] ?? '';
      checkDriverName(driver);
      const client = clientFor(driver);
      try {
        await client.nodeUnpublishVolume(handle, target);
      } catch (err) {
        throw rpcError('NodeUnpublishVolume', err);
      }
      await removePublishDir(dir, target);
      if (data[volDataKey.volumeLifecycleMode] !== 'Ephemeral') await unstageIfUnused(driver, handle);
    }
  }

  const plugin: CSIPlugin = {
    name: csiPluginName,
    init(h) {
      host = h;
    },
    canSupport: (spec) => pvSource(spec) !== undefined || inlineSource(spec) !== undefined,
    requiresRemount(spec) {
      const driver = pvSource(spec)?.driver ?? inlineSource(spec)?.driver;
      return driver !== undefined && csiDriverObject(driver)?.spec?.requiresRepublish === true;
    },
    newMounter: (spec, pod) => new CSIMounter(spec, pod),
    newUnmounter: (inner, podUID) => new CSIUnmounter(inner, podUID),
    /**
     * kubelet's ConstructVolumeSpec, for a volume podvol has no record of (a
     * node taken over from kubelet): the pod's vol_data.json names the driver
     * and handle, so the volume can be unpublished, unstaged and reported in
     * node.status.volumesInUse while it is mounted (an attachable volume left
     * out of that list could be detached under it).
     */
    async constructVolumeSpec(inner, volumePath) {
      checkSpecName(inner);
      const data = await loadVolumeData(volumePath);
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
    async cleanupOrphanedStagedVolumes(onError) {
      await index.load();
      const done: string[] = [];
      let first: { err: unknown } | undefined;
      for (const { driver, handle } of index.staged()) {
        if (index.hasUsers(driver, handle) || !o.drivers.get(driver)) continue;
        const unique = uniqueVolumeName(driver, handle);
        try {
          if (await unstageIfUnused(driver, handle)) done.push(unique);
        } catch (err) {
          // One driver refusing must not stop the unstage of the others.
          if (onError) onError(unique, err);
          else first ??= { err };
        }
      }
      if (first) throw first.err;
      return done;
    },
    async stagedAttachableVolumes() {
      await index.load();
      return index
        .staged()
        .filter(({ driver }) => attachRequired(driver))
        .map(({ driver, handle }) => uniqueVolumeName(driver, handle));
    },
    phaseOf: (podUID, inner) => phases.get(`${podUID}/${inner}`),
    /** Online expansion: a published volume grown while its pod runs (kubelet's GenerateExpandInUseVolumeFunc). */
    async nodeExpand(spec, pod) {
      const src = sourceOf(spec, pod.metadata?.uid ?? '', pod.metadata?.namespace ?? 'default');
      if (src.mode !== 'Persistent') return;
      checkDriverName(src.driver);
      const inner = specName(spec);
      checkSpecName(inner);
      const dir = podVolumeDir(pod.metadata?.uid ?? '', inner);
      if (!(await loadVolumeData(dir))) {
        throw new VolumeError('ExpansionFailed', `volume ${inner} is not published at ${join(dir, 'mount')}`);
      }
      const client = clientFor(src.driver);
      const caps = await capabilities(client);
      const globalmount = caps.has('STAGE_UNSTAGE_VOLUME')
        ? stagingPath(pluginDir(), src.driver, src.handle)
        : '';
      await nodeExpand(spec, pod, { client, caps, target: join(dir, 'mount'), globalmount });
    },
    cancelCalls() {
      const n = inFlight;
      shutdown.abort();
      return n;
    },
    async volumeStats(podUID, inner) {
      checkSpecName(inner);
      const dir = podVolumeDir(podUID, inner);
      const data = await loadVolumeData(dir);
      if (!data) return undefined;
      const driver = data[volDataKey.driverName] ?? '';
      const handle = data[volDataKey.volHandle] ?? '';
      const client = clientFor(driver);
      if (!(await capabilities(client)).has('GET_VOLUME_STATS')) return undefined;
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
      if (!pv || !attachRequired(pv.driver)) return undefined;
      return uniqueVolumeName(pv.driver, pv.volumeHandle);
    },
  };
  return plugin;
}
