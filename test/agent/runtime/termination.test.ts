// The teardown rule: never-handed-off pods go at once; handed-off ones are
// held until `terminated` or their grace period ends, across restarts.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { TerminationGate } from '../../../src/agent/runtime/termination.ts';
import { systemClock } from '../../../src/clock.ts';

const staticPod = (uid: string, grace?: number): V1Pod => ({
  metadata: { uid, name: uid, namespace: 'default', annotations: { 'kubernetes.io/config.source': 'file' } },
  spec: { containers: [], terminationGracePeriodSeconds: grace },
});
const apiPod = (uid: string, deletionTimestamp?: string): V1Pod =>
  ({
    metadata: {
      uid,
      name: uid,
      namespace: 'default',
      deletionTimestamp,
      annotations: { 'kubernetes.io/config.source': 'api' },
    },
    spec: { containers: [] },
  }) as unknown as V1Pod;

async function setup(t: import('node:test').TestContext) {
  const rootDir = await mkdtemp(join(tmpdir(), 'podvol-gate-'));
  t.after(() => rm(rootDir, { recursive: true, force: true }));
  let now = 1_000_000;
  const clock = { advance: (ms: number) => (now += ms), now: () => now };
  const make = async () => {
    const g = new TerminationGate({
      rootDir,
      logger: pino({ level: 'silent' }),
      clock: { ...systemClock(), now: clock.now },
    });
    await g.load();
    return g;
  };
  return { clock, make };
}

test('a pod never handed to a runtime is not held', async (t) => {
  const { make } = await setup(t);
  const g = await make();
  assert.equal(g.filter([staticPod('a')], true).length, 1);
  assert.equal(g.filter([], true).length, 0);
  assert.equal(g.held('a'), undefined);
});

test('a static pod handed off is held for terminationGracePeriodSeconds after its manifest went, or until terminated', async (t) => {
  const { make, clock } = await setup(t);
  const g = await make();
  g.filter([staticPod('a', 10), staticPod('b')], true);
  await g.markHandedOff(staticPod('a', 10));
  await g.markHandedOff(staticPod('b'));
  g.filter([], true);
  assert.deepEqual(g.held('a'), {
    since: new Date(1_000_000).toISOString(),
    deadline: new Date(1_010_000).toISOString(),
    secondsLeft: 10,
  });
  assert.equal(g.held('b')?.secondsLeft, 30, 'default grace period');
  clock.advance(10_000);
  assert.equal(g.held('a'), undefined, 'grace period over');
  assert.ok(g.held('b'));
  assert.equal(await g.markTerminated('b', false), true);
  assert.equal(g.held('b'), undefined, 'terminated releases it');
  assert.equal(await g.markTerminated('zzz', false), false, 'unknown pod');
});

test('an API pod handed off is held until its deletionTimestamp; a deleting pod is no longer desired', async (t) => {
  const { make, clock } = await setup(t);
  const g = await make();
  g.filter([apiPod('x')], true);
  await g.markHandedOff(apiPod('x'));
  const deleting = apiPod('x', new Date(clock.now() + 5000).toISOString());
  assert.deepEqual(g.filter([deleting], true), []);
  assert.equal(g.held('x')?.secondsLeft, 5);
  clock.advance(5000);
  assert.equal(g.held('x'), undefined);
});

test('hand-off and grace period survive a restart', async (t) => {
  const { make, clock } = await setup(t);
  const g1 = await make();
  g1.filter([staticPod('a', 60)], true);
  await g1.markHandedOff(staticPod('a', 60));
  // The manifest goes while podvol is down.
  const g2 = await make();
  g2.filter([], false);
  g2.filter([], true);
  await g2.flush();
  assert.equal(g2.held('a')?.secondsLeft, 60, 'the grace period starts when podvol sees the pod gone');
  clock.advance(30_000);
  const g3 = await make();
  g3.filter([], true);
  assert.equal(g3.held('a')?.secondsLeft, 30, 'and its deadline is remembered');
  await g3.markTerminated('a', false);
  const g4 = await make();
  g4.filter([], true);
  assert.equal(g4.held('a'), undefined, 'terminated is remembered too');
});
