// P1: set-up and teardown of N pods × 3 volumes by podvol (standalone mode,
// static manifests), against a shell script and a bare syscall loop doing the
// steps `podvol plan` lists for the same pods, in the same run (baselines run
// before and after podvol; their mean is the baseline).
// Run: node bench/setup-teardown.bench.ts [--pods=300] [--smoke]   (env BENCH_PODS)
import { mkdirSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mountPointsAtOrBelow } from '../test/helpers/mounts.ts';
import { bareLoop, manifestStream, planSteps, shellScript, threeVolumePod } from './baseline.ts';
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

  const steps = planSteps(file, baseRoot, NODE);
  const mounts = steps.filter((s) => s.action === 'mount').length;
  if (mounts !== VOLUMES) throw new Error(`plan has ${mounts} mounts, expected ${VOLUMES}`);
  const setupScript = shellScript(steps, 'setup');
  const teardownScript = shellScript(steps, 'teardown');
  console.log(
    `plan: ${steps.filter((s) => s.phase === 'setup').length} set-up steps (${mounts} mounts), ${steps.filter((s) => s.phase === 'teardown').length} teardown steps`,
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
  try {
    await podvol.until200('/readyz', 20);
    const mounted = waitLines(podvol, 'MountVolume.SetUp succeeded', VOLUMES);
    const mountsBefore = podvol.count('Mounting');
    const t0 = performance.now();
    renameSync(file, join(manifests, 'pods.yaml'));
    setupMs = (await mounted) - t0;
    mountCalls = podvol.count('Mounting') - mountsBefore;
    if (mountPointsAtOrBelow(podvolRoot).length !== VOLUMES)
      throw new Error('podvol did not mount everything');

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
  goal('P1 set-up ÷ shell', setupMs / sh.setup, 1.2, 'x');
  goal('P1 teardown ÷ shell (until pod directories are gone)', removedMs / sh.teardown, 1.5, 'x');
} finally {
  tmp.cleanup();
}
