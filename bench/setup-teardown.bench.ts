// P1: set-up and teardown of N pods × 3 volumes by podvol (standalone mode,
// static manifests), against the fixed floor of baseline.ts (the least the
// kernel and mount(8) must do for the same end state, as a shell script and as
// a bare syscall loop), in the same run (the floor runs before and after
// podvol; the mean counts). The floor is checked against podvol's end state.
// Run: node bench/setup-teardown.bench.ts [--pods=300] [--smoke]   (env BENCH_PODS)
import { mkdirSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { mountPointsAtOrBelow } from '../test/helpers/mounts.ts';
import {
  bareLoop,
  floorSteps,
  manifestStream,
  sameEndState,
  shellScript,
  threeVolumePod,
} from './baseline.ts';
import {
  ensureMountNamespace,
  figure,
  goal,
  header,
  size,
  startPodvol,
  tempRoot,
  timeBash,
  until,
  waitLines,
} from './lib.ts';

ensureMountNamespace();
const PODS = size('pods', 300, 4);
const VOLUMES = PODS * 3;
const NODE = 'benchnode';

const tmp = tempRoot('p1');
try {
  header('P1 set-up and teardown', { pods: PODS, volumes: VOLUMES });
  const staging = join(tmp.dir, 'staging');
  const manifests = join(tmp.dir, 'manifests');
  const baseRoot = join(tmp.dir, 'baseline');
  const podvolRoot = join(tmp.dir, 'podvol');
  mkdirSync(staging);
  mkdirSync(manifests);
  const file = join(staging, 'pods.yaml');
  writeFileSync(file, manifestStream(Array.from({ length: PODS }, (_, i) => threeVolumePod(i))));

  const steps = floorSteps(
    baseRoot,
    Array.from({ length: PODS }, (_, i) => `floor-${i}`),
  );
  const mounts = steps.filter((s) => s.action === 'mount').length;
  const setupScript = shellScript(steps, 'setup');
  const teardownScript = shellScript(steps, 'teardown');
  console.log(
    `floor: ${steps.filter((s) => s.phase === 'setup').length} set-up steps (${mounts} mounts), ${steps.filter((s) => s.phase === 'teardown').length} teardown steps`,
  );

  const shell = { setup: [] as number[], teardown: [] as number[] };
  const bare = { setup: [] as number[], teardown: [] as number[] };
  const baselineRound = () => {
    shell.setup.push(timeBash(setupScript));
    if (mountPointsAtOrBelow(baseRoot).length !== VOLUMES)
      throw new Error('shell baseline did not mount everything');
    shell.teardown.push(timeBash(teardownScript));
    bare.setup.push(bareLoop(steps, 'setup'));
    bare.teardown.push(bareLoop(steps, 'teardown'));
    if (mountPointsAtOrBelow(baseRoot).length !== 0) throw new Error('baseline teardown left mounts');
  };

  baselineRound();

  const podvol = await startPodvol({ rootDir: podvolRoot, manifests, nodeName: NODE });
  let setupMs: number;
  let unmountedMs: number;
  let removedMs: number;
  let mountCalls: number;
  let unmountCalls: number;
  // Issue 20's standalone RSS figures: idle, with the pods set up, and after their teardown.
  const rss = { idle: 0, loaded: 0, after: 0 };
  try {
    await podvol.until200('/readyz', 20);
    rss.idle = podvol.memory().rss;
    const mounted = waitLines(podvol, 'MountVolume.SetUp succeeded', VOLUMES);
    const mountsBefore = podvol.count('Mounting');
    const t0 = performance.now();
    renameSync(file, join(manifests, 'pods.yaml'));
    setupMs = (await mounted) - t0;
    mountCalls = podvol.count('Mounting') - mountsBefore;
    rss.loaded = podvol.memory().rss;
    if (mountPointsAtOrBelow(podvolRoot).length !== VOLUMES)
      throw new Error('podvol did not mount everything');
    // The floor is honest only if it builds what podvol built: one pod of each, compared entry by entry.
    const first = (await podvol.status()).pods.find((p) => p.name === `bench-0-${NODE}`);
    if (!first) throw new Error('podvol does not list bench-0');
    const checkRoot = join(tmp.dir, 'check');
    const one = floorSteps(checkRoot, ['floor-0']);
    bareLoop(one, 'setup');
    try {
      sameEndState(join(checkRoot, 'pods', 'floor-0'), join(podvolRoot, 'pods', first.uid));
    } finally {
      bareLoop(one, 'teardown');
    }

    const unmounted = waitLines(podvol, 'UnmountVolume.TearDown succeeded', VOLUMES);
    const unmountsBefore = podvol.count('Unmounting');
    const t1 = performance.now();
    unlinkSync(join(manifests, 'pods.yaml'));
    unmountedMs = (await unmounted) - t1;
    removedMs =
      (await until('pod directories removed', () => readdirSync(join(podvolRoot, 'pods')).length === 0, 20)) -
      t1;
    unmountCalls = podvol.count('Unmounting') - unmountsBefore;
    if (mountPointsAtOrBelow(podvolRoot).length !== 0) throw new Error('podvol teardown left mounts');
    // After the give-back's quiet period (3 s, src/agent/give-back.ts) and a margin: RSS as it stays.
    await sleep(5_000);
    rss.after = podvol.memory().rss;
  } finally {
    await podvol.stop();
  }

  baselineRound();

  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const sh = { setup: mean(shell.setup), teardown: mean(shell.teardown) };
  const ba = { setup: mean(bare.setup), teardown: mean(bare.teardown) };
  figure('shell baseline: set-up', sh.setup, 'ms');
  figure('bare syscall baseline: set-up', ba.setup, 'ms');
  figure('podvol: set-up (manifest in → all SetUp succeeded)', setupMs, 'ms', {
    name: 'shell',
    value: sh.setup,
  });
  figure('podvol: set-up', setupMs, 'ms', { name: 'bare', value: ba.setup });
  figure('shell baseline: teardown', sh.teardown, 'ms');
  figure('bare syscall baseline: teardown', ba.teardown, 'ms');
  figure('podvol: teardown (manifest out → all unmounted)', unmountedMs, 'ms', {
    name: 'shell',
    value: sh.teardown,
  });
  figure('podvol: teardown (… → pod directories removed)', removedMs, 'ms', {
    name: 'shell',
    value: sh.teardown,
  });
  figure('podvol: teardown (… → all unmounted)', unmountedMs, 'ms', { name: 'bare', value: ba.teardown });
  console.log(`podvol mount calls: ${mountCalls} for ${VOLUMES} volumes; umount calls: ${unmountCalls}`);
  console.log(
    `baseline spread: shell set-up ${shell.setup.map((x) => x.toFixed(0)).join('/')} ms, teardown ${shell.teardown.map((x) => x.toFixed(0)).join('/')} ms (before/after podvol)`,
  );
  figure('podvol RSS idle (standalone)', rss.idle, 'MiB');
  figure(`podvol RSS with ${PODS} pods × 3 volumes`, rss.loaded, 'MiB');
  figure('podvol RSS after their teardown', rss.after, 'MiB', { name: 'idle', value: rss.idle });
  goal('P1 set-up ÷ shell', setupMs / sh.setup, 1.2, 'x');
  goal('P1 teardown ÷ shell (until pod directories are gone)', removedMs / sh.teardown, 1.5, 'x');
  // Issue 20's: against the floor, the faster of its two forms in this run.
  const floor = { setup: Math.min(sh.setup, ba.setup), teardown: Math.min(sh.teardown, ba.teardown) };
  goal('P1 set-up ÷ floor', setupMs / floor.setup, 1.3, 'x');
  goal('P1 teardown ÷ floor (until pod directories are gone)', removedMs / floor.teardown, 1.5, 'x');
  goal('RSS idle, standalone', rss.idle, 80, ' MiB');
  goal(`RSS with ${PODS} pods × 3 volumes`, rss.loaded, 150, ' MiB');
} finally {
  tmp.cleanup();
}
