// The /status document: every pod podvol knows of, each volume's state and,
// when it is not ready, the reason. Built from the desired and actual states
// and the operation executor; never holds secret data.

import type { VolumeReason } from '../../reasons.ts';
import { reasonOf, type Spec } from '../../volumehost/volume.ts';
import type { ActualStateOfWorld, MountedVolume } from './actual-state.ts';
import type { DesiredStateOfWorld, VolumeToMount } from './desired-state.ts';
import type { OperationExecutor } from './operation-executor.ts';
import type { EmptyDirUsage } from './volume-stats.ts';

export type VolumeState = 'mounted' | 'pending' | 'failed' | 'unmounting';

export interface VolumeStatus {
  name: string;
  plugin: string;
  state: VolumeState;
  path: string;
  /** A VolumeReason, or '' while nothing is wrong. */
  reason: VolumeReason | '';
  message: string;
  attempts: number;
  /** RFC 3339 time the volume was first desired for the pod, by this process or (from the volume's record) an earlier one: what AGE counts from. Absent once it is no longer desired (unmounting, or dropped from the spec). */
  since?: string;
  /** The CSI driver of a CSI volume. */
  driver?: string;
  /** While SetUp runs, the step it is at (CSI: attaching, staging, publishing). */
  phase?: string;
  /** emptyDir: bytes in use at the last measurement (at most once a minute, as kubelet's volume stats). */
  usedBytes?: number;
  /** emptyDir: its sizeLimit, as Quantity.String() prints it. */
  sizeLimit?: string;
}

/** A pod no longer desired whose volumes are held for a runtime (the runtime contract's rule 4). */
export interface Terminating {
  since: string;
  deadline: string;
  secondsLeft: number;
}

export interface StatusHooks {
  held(uid: string): Terminating | undefined;
  specChange(v: MountedVolume, d: VolumeToMount | undefined): 'none' | 'rerender' | 'restart';
}

export const SPEC_CHANGE_REASON = 'SpecChangeRequiresRestart';

export interface PodStatus {
  namespace: string;
  name: string;
  uid: string;
  volumes: VolumeStatus[];
  /** Set while the pod is terminating: its volumes stay until the runtime says terminated or the time is up. */
  terminating?: Terminating;
  /** Set when the pod's directory could not be cleaned up. */
  message?: string;
}

const csiDriverOf = (spec: Spec | undefined): { driver?: string } => {
  const driver = spec?.persistentVolume?.spec?.csi?.driver ?? spec?.volume?.csi?.driver;
  return driver ? { driver } : {};
};
const phaseField = (phase: string | undefined): { phase?: string } => (phase ? { phase } : {});

/** AGE's start: an adopted volume's record time, else when this process first desired it. */
const sinceOf = (d: VolumeToMount, v: MountedVolume | undefined) =>
  new Date(v?.created ?? d.since).toISOString();

export function buildStatus(
  dsw: DesiredStateOfWorld,
  asw: ActualStateOfWorld,
  executor: OperationExecutor,
  podErrors: Map<string, string>,
  phaseOf: (podUID: string, innerName: string, pluginName: string) => string | undefined = () => undefined,
  usage: (key: string) => EmptyDirUsage | undefined = () => undefined,
  hooks?: StatusHooks,
  onlyUID?: string,
): PodStatus[] {
  const out: PodStatus[] = [];
  const desiredPods = onlyUID === undefined ? dsw.pods() : [dsw.pod(onlyUID)].filter((p) => p !== undefined);
  for (const p of desiredPods) {
    const volumes: VolumeStatus[] = [];
    for (const d of p.volumes.values()) {
      const v = asw.get(d.key);
      const op = executor.state(d.key);
      // What is on disk, as it was mounted: for a volume whose mounted state wins over its spec.
      const asMounted = (m: MountedVolume) => ({
        name: d.volumeName,
        plugin: m.pluginName,
        path: m.path,
        attempts: 0,
        since: sinceOf(d, m),
      });
      if (v && op?.pending && op.operationName === 'volume_unmount') {
        // The pod came back (the same UID) while the teardown of what it had was running: the
        // volume is going away, and is set up afresh once that ends. Reported as mounted, a
        // runtime would start a container on an emptyDir that is about to be deleted.
        volumes.push({
          ...asMounted(v),
          state: 'unmounting',
          reason: '',
          message:
            'the pod was desired again while this volume was being torn down; it is set up again once that ends',
        });
        continue;
      }
      if (v?.state === 'mounted' && hooks?.specChange(v, d) === 'restart') {
        volumes.push({
          ...asMounted(v),
          state: 'mounted',
          reason: SPEC_CHANGE_REASON,
          message:
            'the volume spec changed; it stays as mounted and the change takes effect when the pod is recreated',
        });
        continue;
      }
      const u = v?.state === 'mounted' ? usage(d.key) : undefined;
      const base = {
        name: d.volumeName,
        plugin: d.pluginName ?? '',
        path: d.path ?? '',
        attempts: op?.attempts ?? 0,
        since: sinceOf(d, v),
        ...csiDriverOf(d.spec),
        ...phaseField(op?.pending ? phaseOf(d.podUID, d.innerName, d.pluginName ?? '') : undefined),
        ...(u ? { usedBytes: u.usedBytes } : {}),
        ...(u?.sizeLimit ? { sizeLimit: u.sizeLimit } : {}),
      };
      if (d.problem) {
        volumes.push({ ...base, state: 'failed', reason: d.problem.reason, message: d.problem.message });
      } else if (op?.lastError && !op.pending) {
        const fallback = op.operationName === 'volume_unmount' ? 'UnmountFailed' : 'MountFailed';
        volumes.push({
          ...base,
          // A mounted volume whose refresh failed keeps serving its last content.
          state: v?.state === 'mounted' ? 'mounted' : 'failed',
          reason: reasonOf(op.lastError, fallback),
          message: op.lastError.message,
        });
      } else if (v?.state === 'mounted' && u?.unresponsive) {
        volumes.push({
          ...base,
          state: 'mounted',
          reason: 'FilesystemUnresponsive',
          message: u.unresponsive,
        });
      } else if (v?.state === 'mounted' && u?.exceeded) {
        // kubelet would evict the pod; the volume stays mounted and says why.
        volumes.push({ ...base, state: 'mounted', reason: 'SizeLimitExceeded', message: u.exceeded });
      } else if (v?.state === 'mounted') {
        volumes.push({ ...base, state: 'mounted', reason: '', message: '' });
      } else {
        volumes.push({ ...base, state: 'pending', reason: '', message: '' });
      }
    }
    // Volumes the pod no longer names stay mounted under it until it is recreated.
    for (const v of asw.forPod(p.uid)) {
      if (p.volumes.has(v.volumeName)) continue;
      volumes.push({
        name: v.volumeName,
        plugin: v.pluginName,
        path: v.path,
        attempts: 0,
        state: 'mounted',
        reason: SPEC_CHANGE_REASON,
        message: 'the volume is no longer in the pod spec; it stays mounted until the pod is recreated',
      });
    }
    volumes.sort((a, b) => a.name.localeCompare(b.name));
    out.push({
      namespace: p.pod.metadata?.namespace ?? '',
      name: p.pod.metadata?.name ?? '',
      uid: p.uid,
      volumes,
    });
  }
  const leaving = new Map<string, PodStatus>();
  for (const v of onlyUID === undefined ? asw.all() : asw.forPod(onlyUID)) {
    if (dsw.pod(v.podUID)) continue;
    const held = hooks?.held(v.podUID);
    let pod = leaving.get(v.podUID);
    if (!pod) {
      pod = { namespace: v.podNamespace, name: v.podName, uid: v.podUID, volumes: [] };
      if (held) pod.terminating = held;
      leaving.set(v.podUID, pod);
    }
    const op = executor.state(v.key);
    pod.volumes.push({
      name: v.volumeName,
      plugin: v.pluginName,
      state: held ? 'mounted' : 'unmounting',
      path: v.path,
      reason: op?.lastError ? reasonOf(op.lastError, 'UnmountFailed') : '',
      message: op?.lastError?.message ?? '',
      attempts: op?.attempts ?? 0,
    });
  }
  for (const [uid, message] of podErrors) {
    if (onlyUID !== undefined && uid !== onlyUID) continue;
    if (!dsw.pod(uid) && !leaving.has(uid))
      leaving.set(uid, { namespace: '', name: '', uid, volumes: [], message });
  }
  out.push(...leaving.values());
  return out.sort((a, b) =>
    `${a.namespace}/${a.name}/${a.uid}`.localeCompare(`${b.namespace}/${b.name}/${b.uid}`),
  );
}
