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
}

export class ActualStateOfWorld {
  readonly #volumes = new Map<string, MountedVolume>();
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

  set(v: MountedVolume): void {
    this.#volumes.set(v.key, v);
    this.#changed();
  }

  delete(key: string): void {
    if (this.#volumes.delete(key)) this.#changed();
  }

  hasPod(podUID: string): boolean {
    for (const v of this.#volumes.values()) if (v.podUID === podUID) return true;
    return false;
  }

  /** kubelet's MarkRemountRequired: only plugins that ask for it are refreshed. */
  markRemountRequired(podUID: string, requiresRemount: (v: MountedVolume) => boolean): void {
    for (const v of this.#volumes.values()) {
      if (v.podUID === podUID && requiresRemount(v)) v.remountRequired = true;
    }
  }
}
