// What the runtime API needs from the volume manager, and nothing more: the
// runtime socket answers from the same desired and actual state as /status.
import type { V1Pod } from '@kubernetes/client-node';
import type { Spec } from '../../volumehost/volume.ts';
import type { PodStatus } from '../volumemanager/status.ts';

/** A volume of a desired pod, as the volume manager set it up. */
export interface PodVolume {
  name: string;
  /** The volume's directory name (a claim's PersistentVolume name): subpaths are kept under it, as kubelet does. */
  innerName?: string;
  pluginName?: string;
  spec?: Spec;
  /** Where the volume is on the host (its SetUp path). */
  path?: string;
}

export interface RuntimeState {
  /** A pod podvol wants set up (from a pod source), with its volumes. */
  desiredPod(uid: string): { pod: V1Pod; volumes: Map<string, PodVolume> } | undefined;
  /** The pod as /status shows it: desired, or still being torn down. */
  podStatus(uid: string): PodStatus | undefined;
  /** Every pod /status shows. */
  pods(): PodStatus[];
  /**
   * Calls `fn` after anything podStatus/desiredPod/hasMountedVolumes may
   * answer differently (volume manager change events); returns the
   * unsubscribe function. Waits are woken by it, never by polling.
   */
  onChange(fn: () => void): () => void;
  /** True while any volume of the pod is (possibly) mounted. */
  hasMountedVolumes(uid: string): boolean;
  /** kubelet's GetAttributes().ReadOnly: configMap, secret, downwardAPI and projected always are. */
  volumeReadOnly(v: PodVolume, pod: V1Pod): boolean;
  /** The mounts endpoint answered for this pod: from now on only `terminated` or the grace period ends it. */
  markHandedOff(uid: string): Promise<void>;
  /** The runtime says every container of the pod has stopped. Returns false for an unknown pod. */
  markTerminated(uid: string): Promise<boolean>;
}
