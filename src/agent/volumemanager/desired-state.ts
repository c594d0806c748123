// Pods × the volumes their containers use (kubelet's DesiredStateOfWorld plus
// the populator that fills it). A volume that cannot be set up (invalid spec,
// no plugin) stays in the desired state with its problem, so /status shows why.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { isMigratable, translateInTreeSpecToCSI } from '../../plugins/csi/translation.ts';
import { usedVolumeNames, type VolumeProblem, validatePodVolumes } from '../../plugins/validation.ts';
import type { ClaimLookup } from '../../volumehost/kube/claims.ts';
import type { VolumePluginMgr } from '../../volumehost/plugin-manager.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { reasonOf, type Spec, specName } from '../../volumehost/volume.ts';
import { claimNameOf, resolveClaimVolume } from './claims.ts';

export interface VolumeToMount {
  key: string;
  podUID: string;
  volumeName: string;
  /**
   * kubelet's InnerVolumeSpecName: the name of the volume directory, which is
   * the PersistentVolume's name for a claim and the pod's volume name otherwise.
   */
  innerName: string;
  pluginName?: string;
  spec?: Spec;
  path?: string;
  requiresRemount: boolean;
  problem?: VolumeProblem;
  /** When this volume of this pod was first desired (ms since the epoch): its age in `podvol status`. */
  since: number;
  /** Set on volumes whose problem may clear when a claim or volume object changes. */
  waitsForClaim?: boolean;
}

export interface DesiredPod {
  uid: string;
  pod: V1Pod;
  volumes: Map<string, VolumeToMount>;
  /** Changes when something a remount-requiring plugin renders (labels, annotations) changes. */
  fingerprint: string;
}

export const volumeKey = (podUID: string, volumeName: string) => `${podUID}/${volumeName}`;

const fingerprintOf = (pod: V1Pod) =>
  JSON.stringify([pod.metadata?.labels ?? {}, pod.metadata?.annotations ?? {}, pod.status?.podIP ?? '']);

function volumesOf(
  pod: V1Pod,
  pluginMgr: VolumePluginMgr,
  claims: ClaimLookup | undefined,
  prev: DesiredPod | undefined,
  since: (key: string) => number,
): Map<string, VolumeToMount> {
  const uid = pod.metadata?.uid ?? '';
  const problems = validatePodVolumes(pod);
  const used = usedVolumeNames(pod);
  const out = new Map<string, VolumeToMount>();
  const add = (
    name: string,
    v: Omit<VolumeToMount, 'key' | 'podUID' | 'volumeName' | 'since' | 'innerName'> & { innerName?: string },
  ) => {
    const key = volumeKey(uid, name);
    out.set(name, { key, podUID: uid, volumeName: name, since: since(key), innerName: name, ...v });
  };

  for (const [name, problem] of problems) add(name, { requiresRemount: false, problem });
  for (const volume of pod.spec?.volumes ?? []) {
    const name = volume?.name;
    if (typeof name !== 'string' || out.has(name) || !used.has(name)) continue;
    const isClaim = claimNameOf(pod, volume) !== undefined;
    // kubelet resolves a pod's claims once: a claim deleted or rebound under a
    // running pod does not take its volume away.
    const before = prev?.volumes.get(name);
    if (isClaim && before && !before.problem) {
      out.set(name, before);
      continue;
    }
    try {
      let spec: Spec = isClaim ? resolveClaimVolume(pod, volume, claims) : { volume, readOnly: false };
      // kubelet's populator: an in-tree type whose plugin migrated to CSI is the CSI driver's volume from here on.
      if (isMigratable(spec)) spec = translateInTreeSpecToCSI(spec, pod.metadata?.namespace ?? '');
      const plugin = pluginMgr.findPluginBySpec(spec);
      const path = plugin.newMounter(spec, pod).getPath();
      add(name, {
        pluginName: plugin.name,
        spec,
        path,
        innerName: specName(spec),
        requiresRemount: plugin.requiresRemount(spec),
      });
    } catch (err) {
      add(name, {
        requiresRemount: false,
        waitsForClaim: isClaim,
        problem: { reason: reasonOf(err, 'UnknownVolumeSource'), message: errorMessage(err) },
      });
    }
  }
  return out;
}

export class DesiredStateOfWorld {
  readonly #pods = new Map<string, DesiredPod>();
  readonly #firstDesired = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * Replaces the desired pods. Returns the UIDs of pods kept whose rendered
   * content changed, so the caller can mark their volumes for remount.
   */
  replace(pods: V1Pod[], pluginMgr: VolumePluginMgr, host: VolumeHost, claims?: ClaimLookup): string[] {
    void host;
    const changed: string[] = [];
    const seen = new Set<string>();
    for (const pod of pods) {
      const uid = pod.metadata?.uid;
      if (!uid) continue;
      seen.add(uid);
      const prev = this.#pods.get(uid);
      const fingerprint = fingerprintOf(pod);
      // An unchanged pod is evaluated again only while one of its claims is not usable yet.
      if (prev && prev.pod === pod && ![...prev.volumes.values()].some((v) => v.waitsForClaim)) continue;
      if (prev && prev.fingerprint !== fingerprint) changed.push(uid);
      const since = (key: string) => {
        const t = this.#firstDesired.get(key) ?? this.#now();
        this.#firstDesired.set(key, t);
        return t;
      };
      this.#pods.set(uid, { uid, pod, fingerprint, volumes: volumesOf(pod, pluginMgr, claims, prev, since) });
    }
    for (const uid of this.#pods.keys()) if (!seen.has(uid)) this.#pods.delete(uid);
    for (const key of this.#firstDesired.keys())
      if (!seen.has(key.slice(0, key.indexOf('/')))) this.#firstDesired.delete(key);
    return changed;
  }

  pods(): DesiredPod[] {
    return [...this.#pods.values()];
  }

  /** How many pods the sources deliver (with or without volumes), without copying them. */
  get size(): number {
    return this.#pods.size;
  }

  pod(uid: string): DesiredPod | undefined {
    return this.#pods.get(uid);
  }

  volume(key: string): VolumeToMount | undefined {
    const uid = key.slice(0, key.indexOf('/'));
    return this.#pods.get(uid)?.volumes.get(key.slice(uid.length + 1));
  }

  volumesToMount(): VolumeToMount[] {
    return this.pods().flatMap((p) => [...p.volumes.values()].filter((v) => !v.problem));
  }
}
