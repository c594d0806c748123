// What is really set up (kubelet's ActualStateOfWorld). Only its Mark* calls
// change it: the operations report their results, reconstruction what it found
// on disk, the populator and the daemon the remount and resize marks. Each
// call notifies the listeners. Readers get frozen snapshots: an entry is
// replaced, never changed in place, so an operation holding one sees the volume
// as it was handed out, and no change can bypass the notification.
import type { Spec } from '../../volumehost/volume.ts';

export type MountState = 'mounted' | 'uncertain';

export interface MountedVolume {
  /** `<podUID>/<volumeName>`: the operation key too. */
  readonly key: string;
  readonly podUID: string;
  readonly podNamespace: string;
  readonly podName: string;
  readonly volumeName: string;
  /** The volume directory's name (the PersistentVolume's name for a claim); see VolumeToMount. */
  readonly innerName: string;
  readonly pluginName: string;
  readonly spec: Spec;
  readonly path: string;
  readonly state: MountState;
  readonly remountRequired: boolean;
  /** False when the spec is a skeleton rebuilt without podvol's record (cannot be compared). */
  readonly specExact: boolean;
  /** Found on disk at start-up rather than mounted by this process. */
  readonly reconstructed: boolean;
  /** When the volume was first desired for this pod (ms since the epoch), by this process or, from its record, an earlier one. */
  readonly created?: number;
  /** The claim asks for a bigger filesystem while the volume is mounted (kubelet's online expansion). */
  readonly resizeRequired: boolean;
  /** The claim's resourceVersion that last asked for it: a claim that did not change is not asked again. */
  readonly resizeSeen?: string;
}

/**
 * What an operation reports about a volume (kubelet's MarkVolumeOpts). The
 * remount and resize marks are not in it: they belong to the state and survive
 * a mount, so a mark set while a SetUp runs is not lost when it ends.
 */
export type MarkVolumeOpts = Omit<
  MountedVolume,
  'state' | 'remountRequired' | 'resizeRequired' | 'resizeSeen'
>;

/**
 * A device mounted once for the node (kubelet's attachedVolume with its
 * deviceMountState): a CSI volume staged at globalmount, apart from the pods
 * that publish it. 'uncertain': a stage that may have happened (a driver's
 * DeadlineExceeded, a failed unstage, found on disk after a restart), so it is
 * staged again before a pod's SetUp and unstaged once nothing uses it.
 */
export interface DeviceMountedVolume {
  /** The plugin's unique volume name (kubernetes.io/csi/<driver>^<handle>): the operations' lock. */
  readonly deviceName: string;
  readonly pluginName: string;
  /** The spec it was mounted with (after a restart, a skeleton from disk). */
  readonly spec: Spec;
  readonly deviceMountPath: string;
  readonly state: MountState;
}

export class ActualStateOfWorld {
  readonly #volumes = new Map<string, MountedVolume>();
  readonly #devices = new Map<string, DeviceMountedVolume>();
  /** The same volumes by pod UID: one pod's state is read without walking the node's (runtime API, /status). */
  readonly #byPod = new Map<string, Map<string, MountedVolume>>();
  readonly #changed: () => void;

  /** `changed` is called after every change (the volume manager's change events). */
  constructor(changed: () => void = () => {}) {
    this.#changed = changed;
  }

  get(key: string): MountedVolume | undefined {
    return this.#volumes.get(key);
  }

  all(): MountedVolume[] {
    return [...this.#volumes.values()];
  }

  /** How many volumes are in the actual state, without copying them (the memory give-back reads it on every change). */
  get size(): number {
    return this.#volumes.size;
  }

  /** The volumes of one pod. */
  forPod(podUID: string): MountedVolume[] {
    const m = this.#byPod.get(podUID);
    return m ? [...m.values()] : [];
  }

  hasPod(podUID: string): boolean {
    return this.#byPod.has(podUID);
  }

  /** The devices mounted or maybe mounted (kubelet's GetUnmountedVolumes' counterpart for devices). */
  devices(): DeviceMountedVolume[] {
    return [...this.#devices.values()];
  }

  /** kubelet's GetDeviceMountState: undefined when the device is not mounted. */
  deviceState(deviceName: string): MountState | undefined {
    return this.#devices.get(deviceName)?.state;
  }

  /** kubelet's MarkDeviceAsMounted: MountDevice succeeded. */
  markDeviceAsMounted(d: Omit<DeviceMountedVolume, 'state'>): void {
    this.#putDevice({ ...d, state: 'mounted' });
  }

  /** kubelet's MarkDeviceAsUncertain: MountDevice or UnmountDevice failed half-way, or found on disk. */
  markDeviceAsUncertain(d: Omit<DeviceMountedVolume, 'state'>): void {
    this.#putDevice({ ...d, state: 'uncertain' });
  }

  /** kubelet's MarkDeviceAsUnmounted: UnmountDevice succeeded (or a final MountDevice error cleaned up). */
  markDeviceAsUnmounted(deviceName: string): void {
    if (this.#devices.delete(deviceName)) this.#changed();
  }

  #putDevice(d: DeviceMountedVolume): void {
    const prev = this.#devices.get(d.deviceName);
    if (prev?.state === d.state && prev.spec === d.spec) return;
    this.#devices.set(d.deviceName, Object.freeze(d));
    this.#changed();
  }

  /** kubelet's MarkVolumeAsMounted: SetUp succeeded. */
  markVolumeAsMounted(opts: MarkVolumeOpts): void {
    this.#report(opts, 'mounted');
  }

  /**
   * kubelet's MarkVolumeMountAsUncertain: SetUp or TearDown failed, or the
   * volume was found on disk; something may be mounted and must be torn down
   * if the pod goes away.
   */
  markVolumeMountAsUncertain(opts: MarkVolumeOpts): void {
    this.#report(opts, 'uncertain');
  }

  /** kubelet's MarkVolumeAsUnmounted: TearDown succeeded; the volume is forgotten. */
  markVolumeAsUnmounted(key: string): void {
    const v = this.#volumes.get(key);
    if (!v) return;
    this.#volumes.delete(key);
    this.#unindex(v);
    this.#changed();
  }

  /**
   * kubelet's MarkRemountRequired: the volumes `requiresRemount` picks (of one
   * pod, or of the node) are set up again by the reconciler to refresh what
   * they render. Only plugins that ask for it are refreshed.
   */
  markRemountRequired(requiresRemount: (v: MountedVolume) => boolean, podUID?: string): void {
    const volumes = podUID === undefined ? this.#volumes.values() : (this.#byPod.get(podUID)?.values() ?? []);
    const marked = [...volumes].filter((v) => !v.remountRequired && requiresRemount(v));
    for (const v of marked) this.#put({ ...v, remountRequired: true });
    if (marked.length > 0) this.#changed();
  }

  /**
   * A refresh of the volume begins. Its mark is cleared now rather than when
   * the SetUp ends, so that one set meanwhile (a configMap changed again while
   * it was rendered) asks for another refresh. kubelet has no such call: it
   * clears the mark in MarkVolumeAsMounted and loses a mark set during SetUp.
   */
  clearRemountRequired(key: string): void {
    const v = this.#volumes.get(key);
    if (!v?.remountRequired) return;
    this.#put({ ...v, remountRequired: false });
    this.#changed();
  }

  /**
   * kubelet's MarkFSResizeRequired: the claim, at `resourceVersion`, asks for a
   * bigger filesystem while the volume is mounted.
   */
  markFSResizeRequired(key: string, resourceVersion: string): void {
    const v = this.#volumes.get(key);
    if (!v) return;
    this.#put({ ...v, resizeRequired: true, resizeSeen: resourceVersion });
    this.#changed();
  }

  /** kubelet's MarkVolumeAsResized: the plugin grew the filesystem. */
  markVolumeAsResized(key: string): void {
    const v = this.#volumes.get(key);
    if (!v?.resizeRequired) return;
    this.#put({ ...v, resizeRequired: false });
    this.#changed();
  }

  /**
   * kubelet's SyncReconstructedVolume: a volume reconstructed under its
   * directory's name takes the name of the desired pod volume that lives there.
   * One change, so no listener sees the pod without the volume in between.
   */
  syncReconstructedVolume(key: string, desired: { key: string; volumeName: string }): void {
    const v = this.#volumes.get(key);
    if (!v) return;
    this.#volumes.delete(key);
    this.#unindex(v);
    this.#put({ ...v, key: desired.key, volumeName: desired.volumeName });
    this.#changed();
  }

  /** The fields an operation reports, with the marks the state already holds for the volume. */
  #report(opts: MarkVolumeOpts, state: MountState): void {
    const prev = this.#volumes.get(opts.key);
    this.#put({
      key: opts.key,
      podUID: opts.podUID,
      podNamespace: opts.podNamespace,
      podName: opts.podName,
      volumeName: opts.volumeName,
      innerName: opts.innerName,
      pluginName: opts.pluginName,
      spec: opts.spec,
      path: opts.path,
      specExact: opts.specExact,
      reconstructed: opts.reconstructed,
      ...(opts.created !== undefined ? { created: opts.created } : {}),
      state,
      remountRequired: prev?.remountRequired ?? false,
      resizeRequired: prev?.resizeRequired ?? false,
      resizeSeen: prev?.resizeSeen,
    });
    this.#changed();
  }

  /** Stores `v` frozen (shallow: the spec is the desired state's and is never changed in place). */
  #put(v: MountedVolume): void {
    Object.freeze(v);
    const prev = this.#volumes.get(v.key);
    if (prev && prev.podUID !== v.podUID) this.#unindex(prev);
    this.#volumes.set(v.key, v);
    let m = this.#byPod.get(v.podUID);
    if (!m) {
      m = new Map();
      this.#byPod.set(v.podUID, m);
    }
    m.set(v.key, v);
  }

  #unindex(v: MountedVolume): void {
    const m = this.#byPod.get(v.podUID);
    m?.delete(v.key);
    if (m?.size === 0) this.#byPod.delete(v.podUID);
  }
}
