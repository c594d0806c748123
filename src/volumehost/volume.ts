// Plugin contracts, named after kubelet's pkg/volume/plugins.go and volume.go so
// a reader who knows kubelet finds their way. They live beside the VolumeHost,
// as in kubelet's pkg/volume, because the host hands out plugins' mounters
// (wrapper volumes) and every plugin implements them: the plugins layer sits
// above this one. Online expansion (CSI) extends VolumePlugin with the
// optional interface at the bottom.
import type { V1PersistentVolume, V1Pod, V1Volume } from '@kubernetes/client-node';
import { fieldOf } from '../errno.ts';
import { isVolumeReason, type VolumeReason } from '../reasons.ts';
import type { SafeFs } from './safe-fs.ts';
import type { VolumeHost } from './types.ts';

/** kubelet's volume.Spec: an inline pod volume or a persistent volume. */
export interface Spec {
  /** The pod's volume entry (for a resolved claim: the entry naming the claim). */
  volume?: V1Volume;
  persistentVolume?: V1PersistentVolume;
  readOnly: boolean;
}

/** kubelet's spec.Name(): the PersistentVolume's name when there is one (a resolved claim), else the pod volume's. */
export function specName(spec: Spec): string {
  return spec.persistentVolume?.metadata?.name ?? spec.volume?.name ?? '';
}

/** What one operation hands a plugin's TearDown (kubelet's TearDown takes none). */
export interface UnmounterArgs {
  /**
   * The operation's filesystem (SafeFs.withHeldDirs): walks through it start
   * from the directories the operation's earlier steps opened. Without it
   * (a test, a SetUp outside an operation), the host's (VolumeHost.getFs),
   * which holds none: the same walks, each from its root.
   */
  fs?: SafeFs;
}

/** kubelet's MounterArgs, plus the operation's filesystem (UnmounterArgs.fs). */
export interface MounterArgs extends UnmounterArgs {
  fsUser?: number;
  fsGroup?: number;
  fsGroupChangePolicy?: string;
}

/** The filesystem a SetUp or TearDown walks through: its operation's (see UnmounterArgs.fs), else the host's. */
export function operationFs(host: Pick<VolumeHost, 'getFs'>, args: UnmounterArgs | undefined): SafeFs {
  return args?.fs ?? host.getFs();
}

export interface Attributes {
  readOnly: boolean;
  managed: boolean;
  selinuxRelabel: boolean;
}

export interface Mounter {
  /** Where the volume is visible to containers. */
  getPath(): string;
  /** Idempotent: calling it on a volume that is already set up changes nothing that is correct. */
  setUp(args: MounterArgs): Promise<void>;
  setUpAt(dir: string, args: MounterArgs): Promise<void>;
  getAttributes(): Attributes;
}

export interface Unmounter {
  getPath(): string;
  tearDown(args?: UnmounterArgs): Promise<void>;
  tearDownAt(dir: string, args?: UnmounterArgs): Promise<void>;
}

export interface VolumePlugin {
  /** Qualified name with exactly one '/', e.g. kubernetes.io/empty-dir. */
  readonly name: string;
  init(host: VolumeHost): void;
  canSupport(spec: Spec): boolean;
  /** True for plugins whose content must be refreshed on every pod sync (downwardAPI, configMap...). */
  requiresRemount(spec: Spec): boolean;
  newMounter(spec: Spec, pod: V1Pod): Mounter;
  newUnmounter(volumeName: string, podUID: string): Unmounter;
  /**
   * Rebuild a spec after a restart from what is on disk (volPath is the volume
   * directory), when podvol has no record of it (kubelet's ConstructVolumeSpec).
   */
  constructVolumeSpec(volumeName: string, volumePath: string): Spec | Promise<Spec>;
}

/**
 * kubelet's NodeExpandableVolumePlugin: grows the filesystem of a volume that
 * is mounted while its pod runs (online expansion), when the claim asks for it.
 */
export interface NodeExpandableVolumePlugin extends VolumePlugin {
  nodeExpand(spec: Spec, pod: V1Pod): Promise<void>;
}

export const isNodeExpandable = (p: VolumePlugin): p is NodeExpandableVolumePlugin =>
  'nodeExpand' in p && typeof p.nodeExpand === 'function';

/**
 * A device mounted once per node for every pod that uses the volume (kubelet's
 * DeviceMountableVolumePlugin: CSI's NodeStageVolume at globalmount). The
 * volume manager mounts it before the first pod's SetUp and unmounts it in an
 * operation of its own once no pod has the volume set up and the desired
 * state no longer wants it, retried until it succeeds: until then the device
 * stays in the actual state (and, when attachable, in node.status.volumesInUse).
 */
export interface DeviceMountableVolumePlugin extends VolumePlugin {
  /**
   * kubelet's GetVolumeName for a spec the plugin device-mounts (its unique
   * volume name, the operations' lock), undefined for one it does not (an
   * inline ephemeral CSI volume: publish only).
   */
  getDeviceName(spec: Spec): string | undefined;
  /** kubelet's GetDeviceMountPath: where the device is mounted (CSI's globalmount). */
  getDeviceMountPath(spec: Spec): string;
  /** kubelet's DeviceMounter.MountDevice (with WaitForAttach before it, as the operation generator runs them). */
  mountDevice(spec: Spec, pod: V1Pod): Promise<void>;
  /** kubelet's DeviceUnmounter.UnmountDevice: the device mounted at `deviceMountPath` goes. */
  unmountDevice(deviceMountPath: string): Promise<void>;
  /**
   * The devices mounted (or maybe mounted) on disk, for reconstruction after a
   * restart: each with a skeleton spec (enough for getDeviceName, the
   * attachable check and unmountDevice).
   */
  constructDeviceSpecs(): Promise<{ deviceName: string; deviceMountPath: string; spec: Spec }[]>;
}

export const isDeviceMountable = (p: VolumePlugin): p is DeviceMountableVolumePlugin =>
  'getDeviceName' in p && typeof p.getDeviceName === 'function';

/** The steps of kubelet's mount operation before SetUp, as its Events name them. */
export type VolumeErrorStep = 'WaitForAttach' | 'MountDevice';

/** An error that knows its reason, one of the catalogue in src/reasons.ts. */
export class VolumeError extends Error {
  readonly reason: VolumeReason;
  /**
   * kubelet's step of the mount operation that failed, the prefix of its Event
   * (`MountVolume.<step> failed for volume ...`): 'WaitForAttach' for the wait
   * on the VolumeAttachment, 'MountDevice' for a device mount
   * (NodeStageVolume); unset for SetUp.
   */
  readonly step?: VolumeErrorStep;
  /** The error as kubelet's Event shows it (a driver's gRPC status as it came), when podvol's message adds to it. */
  readonly eventMessage?: string;
  /**
   * kubelet's UncertainProgressError: the operation may still be going on (a
   * driver's DeadlineExceeded), so what it was making may exist.
   */
  readonly uncertain: boolean;
  constructor(
    reason: VolumeReason,
    message: string,
    options?: { cause?: unknown; step?: VolumeErrorStep; eventMessage?: string; uncertain?: boolean },
  ) {
    super(message, options);
    this.name = 'VolumeError';
    this.reason = reason;
    this.step = options?.step;
    this.eventMessage = options?.eventMessage;
    this.uncertain = options?.uncertain === true;
  }
}

/**
 * The reason of a VolumeError or of any error carrying a catalogue reason (the safe
 * filesystem's UnsafePathError); anything else gets `fallback` (its message still says what happened).
 */
export function reasonOf(err: unknown, fallback: VolumeReason): VolumeReason {
  if (err instanceof VolumeError) return err.reason;
  const reason = fieldOf(err, 'reason');
  return isVolumeReason(reason) ? reason : fallback;
}
