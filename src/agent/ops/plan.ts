// `podvol plan`: every directory, mount, file and unmount the daemon would
// make for the pods of a manifest on this node, computed without touching
// the host. Pods go through the same parsing, defaulting, validation and
// desired-state population as in the daemon, so UIDs, paths and problems match.
import type { V1Pod } from '@kubernetes/client-node';
import { reasonOf } from '../../plugins/types.ts';
import { usedVolumeNames } from '../../plugins/validation.ts';
import {
  escapeQualifiedName,
  podDir,
  podPluginsDir,
  podVolumeRecordsDir,
  podVolumesDir,
} from '../../volumehost/paths.ts';
import { parseManifestFile } from '../pods/manifest.ts';
import type { SourceError } from '../pods/types.ts';
import { DesiredStateOfWorld, type VolumeToMount } from '../volumemanager/desired-state.ts';
import { mounterArgsFor } from '../volumemanager/operation-generator.ts';
import type { VolumeRecord } from '../volumemanager/records.ts';
import type { PlanContext } from './plan-host.ts';
import { type Emit, type PlanStep, planSetUp, planTearDown, type VolumePlanInput } from './plan-volumes.ts';

export type { PlanStep } from './plan-volumes.ts';

export interface Plan {
  rootDir: string;
  nodeName: string;
  /** The pods planned, `<namespace>/<name>` as in the steps. */
  pods: { pod: string; uid: string }[];
  steps: PlanStep[];
  /** Documents of the manifest that are not usable pods (the daemon would report them in /status). */
  errors: SourceError[];
}

/** Exactly what writeRecord stores, so its size is exact too. */
function recordOf(pod: V1Pod, d: VolumeToMount, pluginName: string): VolumeRecord {
  return {
    version: 1,
    podUID: d.podUID,
    podNamespace: pod.metadata?.namespace ?? '',
    podName: pod.metadata?.name ?? '',
    volumeName: d.volumeName,
    pluginName,
    volume: d.spec?.volume ?? { name: d.volumeName },
    readOnly: d.spec?.readOnly ?? false,
  };
}

// The order a reader expects: the pod's volumes as written, then problems
// that are not a volume of the spec (a mount of a volume that does not exist).
function volumeOrder(pod: V1Pod, desired: Map<string, VolumeToMount>): string[] {
  const names = (pod.spec?.volumes ?? [])
    .map((v) => v?.name)
    .filter((n): n is string => typeof n === 'string');
  return [...new Set([...names, ...desired.keys()])];
}

const podLabel = (pod: V1Pod) => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

export function planPods(pods: V1Pod[], ctx: PlanContext): PlanStep[] {
  const steps: PlanStep[] = [];
  const emitter =
    (phase: PlanStep['phase'], pod: string, volume: string): Emit =>
    (action, path, detail = '') =>
      steps.push({ phase, pod, volume, action, path, detail });

  // startDaemon creates the root directory before anything else.
  emitter('setup', '', '')('mkdir', ctx.rootDir, '0750');

  const dsw = new DesiredStateOfWorld();
  dsw.replace(pods, ctx.pluginMgr, ctx.host);
  for (const pod of pods) {
    const uid = pod.metadata?.uid ?? '';
    const podName = podLabel(pod);
    const desired = dsw.pod(uid)?.volumes ?? new Map<string, VolumeToMount>();
    const used = usedVolumeNames(pod);
    const args = mounterArgsFor(pod);
    const planned: VolumePlanInput[] = [];
    let podDirsMade = false;
    for (const name of volumeOrder(pod, desired)) {
      const emit = emitter('setup', podName, name);
      const d = desired.get(name);
      if (!d) {
        if (!used.has(name))
          emit('ignore', '', 'no container mounts it, so it is not set up (as in kubelet)');
        continue;
      }
      if (d.problem || !d.pluginName || !d.spec) {
        const p = d.problem ?? { reason: 'UnknownVolumeSource', message: 'no volume plugin matched' };
        emit('skip', '', `${p.reason}: ${p.message}`);
        continue;
      }
      const v: VolumePlanInput = {
        ctx,
        pod,
        uid,
        volumeName: name,
        pluginName: d.pluginName,
        spec: d.spec,
        path: d.path ?? '',
        args,
      };
      if (!podDirsMade) {
        // kubelet's makePodDataDirs, done before the first SetUp of the pod (volume-manager.ts).
        podDirsMade = true;
        emit('mkdir', podVolumesDir(ctx.rootDir, uid), '0750');
        emit('mkdir', podPluginsDir(ctx.rootDir, uid), '0750');
      }
      const before = steps.length;
      const record = recordOf(pod, d, d.pluginName);
      const recordDir = `${podVolumeRecordsDir(ctx.rootDir, uid)}/${escapeQualifiedName(d.pluginName)}`;
      // The record is written right before SetUp (volume-manager.ts). A volume whose
      // SetUp would fail is shown as one skip line instead.
      emit('mkdir', recordDir, '0750');
      emit(
        'write',
        `${recordDir}/${name}.json`,
        `mode 0600, ${Buffer.byteLength(JSON.stringify(record))} bytes`,
      );
      try {
        planSetUp(emit, v);
        planned.push(v);
      } catch (err) {
        steps.length = before;
        emit('skip', '', `${reasonOf(err, 'MountFailed')}: ${(err as Error).message}`);
      }
    }
    for (const v of planned) {
      const emit = emitter('teardown', podName, v.volumeName);
      planTearDown(emit, v);
      emit(
        'rm',
        `${podVolumeRecordsDir(ctx.rootDir, uid)}/${escapeQualifiedName(v.pluginName)}/${v.volumeName}.json`,
      );
    }
    // Orphan cleanup removes the whole pod directory once no mount is left below it.
    if (podDirsMade) {
      emitter('teardown', podName, '')('rm', podDir(ctx.rootDir, uid));
      emitter('teardown', podName, '')('rm', podVolumeRecordsDir(ctx.rootDir, uid));
    }
  }
  return steps;
}

/** Parses a manifest as the static pod source does and plans its pods. */
export function planManifest(text: string, file: string, ctx: PlanContext): Plan {
  const { pods, errors } = parseManifestFile(text, file, ctx.nodeName);
  return planSource(pods, errors, ctx);
}

/** Plans pods a pod source produced; its errors are the documents that are not usable pods. */
export function planSource(pods: V1Pod[], errors: SourceError[], ctx: PlanContext): Plan {
  return {
    rootDir: ctx.rootDir,
    nodeName: ctx.nodeName,
    pods: pods.map((p) => ({ pod: podLabel(p), uid: p.metadata?.uid ?? '' })),
    steps: planPods(pods, ctx),
    errors,
  };
}

/** The volumes whose SetUp would fail (the daemon would report them failed in /status). */
export const failingVolumes = (plan: Plan): PlanStep[] => plan.steps.filter((s) => s.action === 'skip');
