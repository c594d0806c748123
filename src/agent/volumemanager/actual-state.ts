// What is really set up, updated only by operation results and by
// reconstruction, never by the populator (kubelet's ActualStateOfWorld).
import type { Spec } from '../../plugins/types.ts';

export type MountState = 'mounted' | 'uncertain';

export interface MountedVolume {
  /** `<podUID>/<volumeName>`: the operation key too. */
  key: string;
  podUID: string;
  podNamespace: string;
  podName: string;
  volumeName: string;
  /** The volume directory's name (the PersistentVolume's name for a claim); see VolumeToMount. */
  innerName: string;
  pluginName: string;
  spec: Spec;
  path: string;
  state: MountState;
  remountRequired: boolean;
  /** False when the spec is a skeleton rebuilt without podvol's record (cannot be compared). */
  specExact: boolean;
  /** Found on disk at start-up rather than mounted by this process. */
  reconstructed: boolean;
  /** When the volume was first desired for this pod (ms since the epoch), by this process or, from its record, an earlier one. */
  created?: number;
  /** The claim asks for a bigger filesystem while the volume is mounted (kubelet's online expansion). */
  resizeRequired?: boolean;
  /** The claim's resourceVersion that last asked for it: a claim that did not change is not asked again. */
  resizeSeen?: string;
}

export class ActualStateOfWorld {
  readonly #volumes = new Map<string, MountedVolume>();
  /** The same volumes by pod UID: one pod's state is read without walking the node's (runtime API, /status). */
  readonly #byPod = new Map<string, Map<string, MountedVolume>>();
  readonly #changed: () => void;

  /** `changed` is called after every set and delete (the volume manager's change events). */
  constructor(changed: () => void = () => {}) {
    this.#changed = changed;
  }

  get(key: string): MountedVolume | undefined {
    return this.#volumes.get(key);
  }

  all(): MountedVolume[] {
    return [...this.#volumes.values()];
  }

  /** The volumes of one pod. */
  forPod(podUID: string): MountedVolume[] {
    const m = this.#byPod.get(podUID);
    return m ? [...m.values()] : [];
  }

  set(v: MountedVolume): void {
    const prev = this.#volumes.get(v.key);
    if (prev && prev.podUID !== v.podUID) this.#unindex(prev);
    this.#volumes.set(v.key, v);
    let m = this.#byPod.get(v.podUID);
    if (!m) {
      m = new Map();
      this.#byPod.set(v.podUID, m);
    }
    m.set(v.key, v);
    this.#changed();
  }

  delete(key: string): void {
    const v = this.#volumes.get(key);
    if (!v) return;
    this.#volumes.delete(key);
    this.#unindex(v);
    this.#changed();
  }

  #unindex(v: MountedVolume): void {
    const m = this.#byPod.get(v.podUID);
    m?.delete(v.key);
    if (m?.size === 0) this.#byPod.delete(v.podUID);
  }

  hasPod(podUID: string): boolean {
    return this.#byPod.has(podUID);
  }

  /** kubelet's MarkRemountRequired: only plugins that ask for it are refreshed. */
  markRemountRequired(podUID: string, requiresRemount: (v: MountedVolume) => boolean): void {
    for (const v of this.#byPod.get(podUID)?.values() ?? []) {
      if (requiresRemount(v)) v.remountRequired = true;
    }
  }
}
