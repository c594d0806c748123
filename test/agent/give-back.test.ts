// The memory give-back's policy (issue 20, P4): one collection per big drop of
// the actual state, only after a quiet period and never while an operation is
// in flight; a small teardown or a steady churn collects nothing. Driven by a
// fake clock; the real collection is checked to run and release the heap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { getHeapStatistics } from 'node:v8';
import { GiveBack, lastResortCollection, mallocTrim } from '../../src/agent/give-back.ts';
import { silentLogger } from '../../src/logger.ts';
import { fakeClock } from '../helpers/fake-clock.ts';

function harness(o: { minReleased?: number; maxLeft?: number; quietMs?: number } = {}) {
  const clock = fakeClock();
  const state = { volumes: 0, busy: false, collections: 0 };
  const lines: { obj: Record<string, unknown>; msg?: string }[] = [];
  const logger = {
    ...silentLogger(),
    info: (obj: Record<string, unknown>, msg?: string) => lines.push({ obj, msg }),
  };
  const g = new GiveBack({
    clock,
    logger,
    volumes: () => state.volumes,
    busy: () => state.busy,
    collect: () => state.collections++,
    memory: () => ({ rss: 300 * 2 ** 20, heapTotal: 200 * 2 ** 20, heapUsed: 30 * 2 ** 20 }),
    minReleased: 100,
    maxLeft: 0.25,
    quietMs: 1000,
    ...o,
  });
  /** Moves the actual state to `n` one volume at a time, a change each, `everyMs` apart. */
  const walk = async (n: number, everyMs = 1) => {
    while (state.volumes !== n) {
      state.volumes += state.volumes < n ? 1 : -1;
      g.changed();
      await clock.advance(everyMs);
    }
  };
  return { clock, state, lines, g, walk };
}

test('a big teardown collects once, after the quiet period', async () => {
  const { clock, state, lines, walk } = harness();
  await walk(400);
  await clock.advance(5000);
  assert.equal(state.collections, 0, 'setting up never collects');
  await walk(0);
  // walk() let 1 ms pass after its last change.
  await clock.advance(990);
  assert.equal(state.collections, 0, 'not before the daemon has been quiet for quietMs');
  await clock.advance(9);
  assert.equal(state.collections, 1);
  await clock.advance(60_000);
  assert.equal(state.collections, 1, 'once per drop');
  assert.equal(clock.pending(), 0, 'no timer left behind');
  assert.equal(lines[0]?.msg, 'gave memory back after teardown');
  assert.equal(lines[0]?.obj.peakVolumes, 400);
  assert.equal(lines[0]?.obj.volumes, 0);
});

test('a change during the quiet period moves the deadline', async () => {
  const { clock, state, g, walk } = harness();
  await walk(400);
  await walk(50);
  await clock.advance(900);
  // An operation ends (a failure reported, say): the state changed, the count did not.
  g.changed();
  await clock.advance(900);
  assert.equal(state.collections, 0);
  await clock.advance(100);
  assert.equal(state.collections, 1);
});

test('never while an operation is in flight', async () => {
  const { clock, state, walk } = harness();
  await walk(400);
  await walk(0);
  state.busy = true;
  await clock.advance(10_000);
  assert.equal(state.collections, 0);
  state.busy = false;
  await clock.advance(1000);
  assert.equal(state.collections, 1);
});

test('a small teardown, or few volumes released of many, collects nothing', async () => {
  const { clock, state, walk } = harness();
  await walk(99);
  await walk(0);
  await clock.advance(10_000);
  assert.equal(state.collections, 0, '99 volumes released: under minReleased');
  await walk(1000);
  await walk(300);
  await clock.advance(10_000);
  assert.equal(state.collections, 0, '700 released but 30 % left: more than maxLeft');
  await walk(250);
  await clock.advance(1000);
  assert.equal(state.collections, 1, '25 % left');
});

test('volumes that come back before the quiet period ends cancel the collection', async () => {
  const { clock, state, walk } = harness();
  await walk(400);
  await walk(0, 0);
  // A rollout: the new pods' volumes arrive while the timer waits.
  await walk(400, 0);
  await clock.advance(10_000);
  assert.equal(state.collections, 0);
});

test('the peak restarts after a collection: the next drop is measured from what was left', async () => {
  const { clock, state, walk } = harness();
  await walk(400);
  await walk(20);
  await clock.advance(1000);
  assert.equal(state.collections, 1);
  await walk(90);
  await walk(0);
  await clock.advance(1000);
  assert.equal(state.collections, 1, 'the peak since is 90: 90 released, under minReleased');
  await walk(200);
  await walk(0);
  await clock.advance(1000);
  assert.equal(state.collections, 2);
});

test('stop() cancels a pending collection', async () => {
  const { clock, state, g, walk } = harness();
  await walk(400);
  await walk(0);
  g.stop();
  await clock.advance(10_000);
  assert.equal(state.collections, 0);
  assert.equal(clock.pending(), 0);
});

test('a failing collection is logged, not thrown', async () => {
  const clock = fakeClock();
  let n = 400;
  const warned: string[] = [];
  const g = new GiveBack({
    clock,
    logger: { ...silentLogger(), warn: (_o, msg) => warned.push(msg ?? '') },
    volumes: () => n,
    busy: () => false,
    collect: () => {
      throw new Error('no');
    },
    quietMs: 10,
  });
  g.changed();
  n = 0;
  g.changed();
  await clock.advance(10);
  assert.deepEqual(warned, ['memory give-back failed']);
});

test('lastResortCollection releases the committed heap of garbage', async () => {
  const collect = lastResortCollection();
  let garbage: unknown[] | undefined = [];
  for (let i = 0; i < 300_000; i++) garbage.push({ i, s: `value ${i}`, a: [i] });
  const grown = getHeapStatistics().total_heap_size;
  garbage = undefined;
  await sleep(0);
  collect();
  const after = getHeapStatistics();
  assert.equal(garbage, undefined);
  assert.ok(
    after.total_heap_size < grown / 2,
    `committed heap ${after.total_heap_size} after the collection, ${grown} before`,
  );
  // A second call reuses the function V8 exposed; no flag is set again.
  collect();
});

test('mallocTrim calls glibc through the addon, and is false without it', () => {
  // Freed small C allocations (ArrayBuffer backing stores below mmap's threshold) stay in malloc's heap until trimmed.
  let buffers: Buffer[] | undefined = [];
  for (let i = 0; i < 40_000; i++) buffers.push(Buffer.allocUnsafeSlow(1000).fill(1));
  buffers = undefined;
  lastResortCollection()();
  assert.equal(buffers, undefined);
  assert.equal(mallocTrim()(), true, 'native/malloctrim built (npm ci) and released the freed pages');
  const missing = mallocTrim(new URL('file:///nonexistent/malloctrim.node'));
  assert.equal(missing(), false);
  assert.equal(missing(), false, 'the failed load is remembered, not retried');
});
