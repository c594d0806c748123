// `podvol plan`: every directory, mount, file and unmount the daemon would
// make for the pods of a manifest on this node. It is not a description of
// the plugins but the plugins themselves: pods go through the daemon's
// parsing, defaulting, validation and desired-state population, then each
// volume through the volume manager's own mount operation (pod directories,
// record, the plugin's SetUp) and, for the tear-down section, its unmount
// operation, the reconciler's UnmountDevice of a staged CSI volume no pod uses
// any more, and the orphan clean-up's removal of the pod directory, all
// against the recording host of plan-host.ts (CSI drivers included: the
// recording driver of plan-csi.ts). Nothing reaches the host.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { silentLogger } from '../../logger.ts';
import { usedVolumeNames } from '../../plugins/validation.ts';
import { reasonOf } from '../../volumehost/volume.ts';
import { createPodManager } from '../pod-manager.ts';
import { STATIC_POD_API_REFERENCE, staticPodAPIReference } from '../pods/api-references.ts';
import { parseManifestFile } from '../pods/manifest.ts';
import type { PodSource, SourceError } from '../pods/types.ts';
import { ActualStateOfWorld } from '../volumemanager/actual-state.ts';
import type { VolumeManagerMetrics } from '../volumemanager/context.ts';
import { DesiredStateOfWorld, type VolumeToMount } from '../volumemanager/desired-state.ts';
import {
  mountVolume,
  type OperationContext,
  unmountDevice,
  unmountVolume,
} from '../volumemanager/operation-generator.ts';
import { removePodDirUnlessMounted } from '../volumemanager/orphan-cleanup.ts';
import { devicesToUnmount } from '../volumemanager/reconciler.ts';
import { createPlanContext, type HostStep, type PlanContext, type PlanContextOptions } from './plan-host.ts';

export type PlanAction =
  | 'mkdir'
  | 'mount'
  | 'chmod'
  | 'chown'
  | 'write'
  | 'symlink'
  | 'rename'
  | 'fetch'
  | 'skip'
  | 'ignore'
  | 'umount'
  | 'rm'
  | 'driver';

/**
 * One host operation. `detail` depends on the action: mkdir, chmod: the octal
 * mode (after the umask); mount: the arguments before the target; write: mode
 * and size, or what a placeholder stands for; symlink: the link's target;
 * rename: the new path; chown: the owner and group set; fetch: what is fetched;
 * skip/ignore: why; driver: a CSI call, `<driver> <Method> <request>` (secrets by
 * key name only), its path the request's target or staging path; umount, rm: empty.
 */
export interface PlanStep {
  phase: 'setup' | 'teardown';
  /** `<namespace>/<name>`; empty for node-wide steps. */
  pod: string;
  volume: string;
  action: PlanAction;
  path: string;
  detail: string;
}

/** What is below a directory at one point of the plan (the plan-versus-daemon test compares it). */
export interface PlannedState {
  entries: {
    path: string;
    kind: string;
    mode: number;
    size: number;
    uid: number;
    gid: number;
    target?: string;
    /** A file's bytes (a placeholder's text for API data). */
    data?: Buffer;
  }[];
  mounts: { path: string; fsType: string; options: readonly string[] }[];
}

export interface Plan {
  rootDir: string;
  nodeName: string;
  /** The pods planned, `<namespace>/<name>` as in the steps. */
  pods: { pod: string; uid: string }[];
  steps: PlanStep[];
  /** Documents of the manifest that are not usable pods (the daemon would report them in /status). */
  errors: SourceError[];
  /** Below the root directory (and a --host-root other than /) once every pod is set up. */
  setUp: PlannedState;
  /** The same once every pod is torn down. */
  tornDown: PlannedState;
}

export const octal = (mode: number) => `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;

/** The atomic writer's `..<UTC time>.<random>` directory, which differs on every run. */
const TIMESTAMP_DIR = /\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+/g;
const stable = (s: string) => s.replace(TIMESTAMP_DIR, '..<timestamp>');

function describe(s: HostStep, placeholders: Map<string, string>): { path: string; detail: string } {
  switch (s.action) {
    case 'mkdir':
    case 'chmod':
      return { path: s.path, detail: octal(s.mode) };
    case 'write': {
      const what = placeholders.get(s.data.toString());
      return {
        path: s.path,
        detail: `mode ${octal(s.mode)}, ${what ?? `${s.data.length} bytes`}`,
      };
    }
    case 'chown': {
      const who = [s.uid !== -1 ? `owner ${s.uid}` : '', s.gid !== -1 ? `group ${s.gid}` : ''];
      return { path: s.path, detail: who.filter(Boolean).join(', ') };
    }
    case 'symlink':
      return { path: s.path, detail: s.target };
    case 'rename':
      return { path: s.path, detail: s.to };
    case 'mount':
    case 'driver':
      return { path: s.path, detail: s.detail };
    case 'fetch':
      return { path: '', detail: s.detail };
    case 'umount':
    case 'rm':
      return { path: s.path, detail: '' };
  }
}

// The order a reader expects: the pod's volumes as written, then problems
// that are not a volume of the spec (a mount of a volume that does not exist).
function volumeOrder(pod: V1Pod, desired: Map<string, VolumeToMount>): string[] {
  const names = (pod.spec?.volumes ?? [])
    .map((v) => v?.name)
    .filter((n): n is string => typeof n === 'string');
  return [...new Set([...names, ...desired.keys()])];
}

/**
 * A claim (PersistentVolumeClaim, generic ephemeral volume) is not resolved
 * without an API server; with one, a static pod naming a claim is refused
 * whole, so its PersistentVolume (a CSI one: its driver) is never reached.
 */
function claimNote(pod: V1Pod, nodeName: string): string {
  const refused = staticPodAPIReference(pod, nodeName);
  return refused ? `; with an API server the pod is refused: ${STATIC_POD_API_REFERENCE}: ${refused}` : '';
}

const podLabel = (pod: V1Pod) => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

const noMetrics: VolumeManagerMetrics = {
  operation: () => {},
  operationError: () => {},
  reconcile: () => {},
  reconstructed: () => {},
};

/** claimRootDir's mkdir -p of the root directory (0750), on the recording filesystem. */
async function makeRootDir(ctx: PlanContext): Promise<void> {
  const parts = ctx.rootDir.split('/').filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    await ctx.fs.mkdir(`/${parts.slice(0, i).join('/')}`, 0o750).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

async function stateBelow(ctx: PlanContext): Promise<PlannedState> {
  const hostRoot = ctx.host.getHostRoot?.() ?? '/';
  const dirs = hostRoot === '/' ? [ctx.rootDir] : [ctx.rootDir, hostRoot];
  const entries = dirs
    .flatMap((d) => ctx.fs.walk(d))
    .flatMap((path) => {
      const e = ctx.fs.entry(path);
      if (!e) return [];
      return [{ ...e, path: stable(path), target: e.target === undefined ? undefined : stable(e.target) }];
    });
  const below = (p: string) => p === ctx.rootDir || p.startsWith(`${ctx.rootDir}/`);
  const mounts = (await ctx.mounter.list())
    .filter((m) => below(m.mountPoint))
    .map((m) => ({ path: m.mountPoint, fsType: m.fsType, options: m.superOptions }));
  return { entries, mounts };
}

async function run(
  pods: V1Pod[],
  ctx: PlanContext,
): Promise<{ steps: PlanStep[]; setUp: PlannedState; tornDown: PlannedState }> {
  const steps: PlanStep[] = [];
  let label: Pick<PlanStep, 'phase' | 'pod' | 'volume'> = { phase: 'setup', pod: '', volume: '' };
  const push = (action: PlanAction, path: string, detail: string) => {
    // A removal of a tree is one step: the entries removed below it just before are folded in.
    if (action === 'rm') {
      while (steps.at(-1)?.action === 'rm' && steps.at(-1)?.path.startsWith(`${stable(path)}/`)) steps.pop();
    }
    steps.push({ ...label, action, path: stable(path), detail: stable(detail) });
  };
  ctx.sink.onStep = (s) => {
    const { path, detail } = describe(s, ctx.placeholders);
    push(s.action, path, detail);
  };
  const ops: OperationContext = {
    rootDir: ctx.rootDir,
    host: ctx.host,
    pluginMgr: ctx.pluginMgr,
    logger: silentLogger(),
    metrics: noMetrics,
    asw: new ActualStateOfWorld(),
    freshMountTable: () => ctx.host.getMounter().list(),
  };

  // startDaemon creates the root directory before anything else.
  await makeRootDir(ctx);
  const dsw = new DesiredStateOfWorld();
  dsw.replace(pods, ctx.pluginMgr, ctx.host, ctx.claims);
  for (const pod of pods) {
    const uid = pod.metadata?.uid ?? '';
    const desired = dsw.pod(uid)?.volumes ?? new Map<string, VolumeToMount>();
    const used = usedVolumeNames(pod);
    for (const name of volumeOrder(pod, desired)) {
      label = { phase: 'setup', pod: podLabel(pod), volume: name };
      const d = desired.get(name);
      if (!d) {
        if (!used.has(name))
          push('ignore', '', 'no container mounts it, so it is not set up (as in kubelet)');
        continue;
      }
      if (d.problem || !d.pluginName || !d.spec) {
        const p = d.problem ?? { reason: 'UnknownVolumeSource', message: 'no volume plugin matched' };
        push('skip', '', `${p.reason}: ${p.message}${d.waitsForClaim ? claimNote(pod, ctx.nodeName) : ''}`);
        continue;
      }
      try {
        await mountVolume(ops, d, pod, ops.asw.get(d.key));
      } catch (err) {
        // What SetUp did before it failed stays listed: the daemon leaves it too, until it retries.
        push('skip', '', `${reasonOf(err, 'MountFailed')}: ${errorMessage(err)}`);
      }
    }
  }
  const setUp = await stateBelow(ctx);
  for (const [i, pod] of pods.entries()) {
    const uid = pod.metadata?.uid ?? '';
    // The pod goes away: the desired state no longer wants its volumes.
    dsw.replace(pods.slice(i + 1), ctx.pluginMgr, ctx.host, ctx.claims);
    for (const v of ops.asw.forPod(uid)) {
      label = { phase: 'teardown', pod: podLabel(pod), volume: v.volumeName };
      try {
        await unmountVolume(ops, v);
      } catch (err) {
        push('skip', '', `${reasonOf(err, 'UnmountFailed')}: ${errorMessage(err)}`);
      }
      // The reconciler's next pass: a device (a staged CSI volume) nothing uses any more is unstaged.
      for (const device of devicesToUnmount({ asw: ops.asw, dsw, pluginMgr: ctx.pluginMgr })) {
        try {
          await unmountDevice(ops, device);
        } catch (err) {
          push('skip', '', `${reasonOf(err, 'UnmountFailed')}: ${errorMessage(err)}`);
        }
      }
    }
    label = { phase: 'teardown', pod: podLabel(pod), volume: '' };
    await removePodDirUnlessMounted({ ...ops, mounter: ctx.mounter }, uid);
  }
  return { steps, setUp, tornDown: await stateBelow(ctx) };
}

/** The pods as the daemon's pod manager hands them on: with kubelet's config.source and config.seen. */
function asSeenByDaemon(pods: V1Pod[]): V1Pod[] {
  const source: PodSource = {
    name: 'file',
    start: async () => {},
    stop: async () => {},
    hasSynced: () => true,
    pods: () => pods,
    errors: () => [],
    onChange: () => () => {},
    stats: () => ({}),
  };
  return createPodManager([source]).pods();
}

/** Plans pods a static pod source produced; its errors are the documents that are not usable pods. */
export async function planSource(
  sourcePods: V1Pod[],
  errors: SourceError[],
  o: PlanContextOptions,
): Promise<Plan> {
  const pods = asSeenByDaemon(sourcePods);
  const ctx = await createPlanContext(o, () => pods);
  const { steps, setUp, tornDown } = await run(pods, ctx);
  return {
    rootDir: ctx.rootDir,
    nodeName: ctx.nodeName,
    pods: pods.map((p) => ({ pod: podLabel(p), uid: p.metadata?.uid ?? '' })),
    steps,
    errors,
    setUp,
    tornDown,
  };
}

/** Parses a manifest as the static pod source does and plans its pods. */
export function planManifest(text: string, file: string, o: PlanContextOptions): Promise<Plan> {
  const { pods, errors } = parseManifestFile(text, file, o.nodeName);
  return planSource(pods, errors, o);
}

/** The volumes whose SetUp would fail (the daemon would report them failed in /status). */
export const failingVolumes = (plan: Plan): PlanStep[] =>
  plan.steps.filter((s) => s.action === 'skip' && s.phase === 'setup');
