import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OperationExecutor } from '../../../src/agent/volumemanager/operation-executor.ts';
import { StatProbe } from '../../../src/mount/deadline-stat.ts';
import type { CommandRunner, RunResult } from '../../../src/mount/exec.ts';

test('a key never runs twice at once', async () => {
  const ex = new OperationExecutor();
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  assert.equal(
    ex.run('k', 'volume_mount', () => gate),
    'started',
  );
  assert.equal(
    ex.run('k', 'volume_mount', async () => {}),
    'already-pending',
  );
  assert.equal(
    ex.run('k', 'volume_unmount', async () => {}),
    'already-pending',
  );
  assert.equal(
    ex.run('other', 'volume_mount', async () => {}),
    'started',
  );
  release();
  await ex.drain();
  assert.equal(ex.state('k'), undefined, 'success forgets the key');
});

test('failures back off 0.5 s doubling to 2m2s; another operation resets the backoff', async () => {
  let now = 0;
  const ex = new OperationExecutor(() => now);
  const fail = async () => {
    throw new Error('boom');
  };
  const waits: number[] = [];
  for (let i = 0; i < 12; i++) {
    assert.equal(ex.run('k', 'volume_mount', fail), 'started');
    await ex.drain();
    const s = ex.state('k');
    waits.push(s?.durationBeforeRetryMs ?? -1);
    assert.equal(ex.run('k', 'volume_mount', fail), 'backoff', 'still inside the window');
    now += s?.durationBeforeRetryMs ?? 0;
    assert.equal(ex.run('k', 'volume_mount', fail), 'backoff', 'the boundary itself is still blocked (<=)');
    now += 1;
  }
  assert.deepEqual(waits, [500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 122000, 122000, 122000, 122000]);
  assert.equal(ex.state('k')?.attempts, 12);
  assert.equal(ex.run('k', 'volume_unmount', fail), 'started', 'a different operation is not held back');
  await ex.drain();
  assert.equal(ex.state('k')?.durationBeforeRetryMs, 500);
});

test('the pool bounds operations running at once; a pod beyond half of it gets no slot while another pod waits', async () => {
  const ex = new OperationExecutor(Date.now, 4);
  const release: (() => void)[] = [];
  const op = () => new Promise<void>((r) => release.push(r));
  const offer = (...keys: string[]) =>
    ex.offer(keys.map((key) => ({ key, operationName: 'volume_mount', fn: op })));
  assert.deepEqual(
    offer('a/1', 'a/2', 'a/3', 'b/1', 'c/1', 'd/1'),
    ['started', 'started', 'busy', 'started', 'started', 'busy'],
    'pod a has half the pool while b, c and d wait; then the pool is full',
  );
  assert.equal(ex.runningCount(), 4);
  assert.equal(ex.state('d/1'), undefined, 'a busy refusal is not an attempt');
  release.splice(2, 1)[0]?.(); // b/1 ends
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(offer('a/3', 'd/1'), ['busy', 'started'], 'the freed slot goes to the pod under half');
  for (const r of release.splice(0)) r();
  await ex.drain();
  assert.equal(ex.runningCount(), 0);
});

test('work-conserving: a pod alone takes the whole pool; a slot that frees goes to another pod that waits', async () => {
  const ex = new OperationExecutor(Date.now, 4);
  const release = new Map<string, () => void>();
  const done = new Set<string>();
  // Like a reconciler pass: every volume not yet done is offered, in the pods' order.
  const pass = (...keys: string[]) => {
    const todo = keys.filter((k) => !done.has(k));
    const results = ex.offer(
      todo.map((key) => ({
        key,
        operationName: 'volume_mount',
        fn: () => new Promise<void>((r) => release.set(key, r)),
      })),
    );
    return todo.filter((_, i) => results[i] === 'started');
  };
  const finish = async (...keys: string[]) => {
    for (const k of keys) {
      release.get(k)?.();
      done.add(k);
    }
    await new Promise((r) => setImmediate(r));
  };
  const big = Array.from({ length: 10 }, (_, i) => `big/${i}`);
  const small = ['small/a', 'small/b', 'small/c'];
  assert.deepEqual(pass(...small), small, 'a 3-volume pod alone is set up in one round');
  await finish(...small);

  assert.deepEqual(pass(...big), ['big/0', 'big/1', 'big/2', 'big/3'], 'alone, a pod takes the whole pool');
  const late = ['late/a', 'late/b', 'late/c'];
  // A small pod arrives: the pool is full. Each slot that frees goes to it, not back to the pod
  // beyond half, until it has half the pool itself.
  assert.deepEqual(pass(...big, ...late), []);
  await finish('big/0');
  assert.deepEqual(pass(...big, ...late), ['late/a']);
  await finish('big/1');
  assert.deepEqual(pass(...big, ...late), ['late/b']);
  // Both at half: a slot the big pod frees is its own again (under half), the small one keeps waiting.
  await finish('big/2');
  assert.deepEqual(pass(...big, ...late), ['big/4']);
  // A slot the small pod frees goes to it again, and once it is done, the big pod takes every slot.
  await finish('late/a');
  assert.deepEqual(pass(...big, ...late), ['late/c']);
  await finish('late/b', 'late/c');
  assert.deepEqual(pass(...big, ...late), ['big/5', 'big/6']);
  assert.equal(ex.runningCount(), 4);
  await finish(...big);
  await ex.drain();
});

test('an operation backing off or running is not waiting: it does not keep a pod beyond half', async () => {
  const ex = new OperationExecutor(Date.now, 4);
  const release: (() => void)[] = [];
  const hold = () => new Promise<void>((r) => release.push(r));
  assert.equal(
    ex.run('b/1', 'volume_mount', async () => {
      throw new Error('boom');
    }),
    'started',
  );
  await ex.drain();
  const offers = ['a/1', 'a/2', 'a/3', 'a/4'].map((key) => ({
    key,
    operationName: 'volume_mount',
    fn: hold,
  }));
  assert.deepEqual(ex.offer([...offers, { key: 'b/1', operationName: 'volume_mount', fn: hold }]), [
    'started',
    'started',
    'started',
    'started',
    'backoff',
  ]);
  for (const r of release.splice(0)) r();
  await ex.drain();
});

/** A gate: a promise and the function that opens it. */
function gated<T = void>() {
  const { promise, resolve } = Promise.withResolvers<T>();
  return { promise, open: resolve };
}

const tick = () => new Promise((r) => setImmediate(r));

test('an operation waiting on a hung probe gives its slot back: another pod runs meanwhile, the pool bound holds', async () => {
  let lent = 0;
  const ex = new OperationExecutor(Date.now, 2, undefined, () => lent++);
  const probe = gated<string>();
  const rest = gated();
  const after: string[] = [];
  // Pod "hung" fills the pool alone; each of its operations waits on the same hung probe, then works on.
  const hungOp = (name: string) => async () => {
    after.push(`${name}: ${await ex.whileWaiting(() => probe.promise)}`);
    await rest.promise;
  };
  assert.deepEqual(
    ex.offer([
      { key: 'hung/1', operationName: 'volume_mount', fn: hungOp('hung/1') },
      { key: 'hung/2', operationName: 'volume_mount', fn: hungOp('hung/2') },
    ]),
    ['started', 'started'],
  );
  await tick();
  assert.equal(ex.runningCount(), 0, 'waiting on the probe, neither holds a slot');
  assert.equal(ex.waitingCount(), 2);
  assert.equal(lent, 2, 'each lent slot is reported, so the reconciler offers again');

  // Another pod's operations run while the probe hangs, within the pool's bound.
  const work = [gated(), gated(), gated()];
  const results = ex.offer(
    ['other/1', 'other/2', 'other/3'].map((key, i) => ({
      key,
      operationName: 'volume_mount',
      fn: () => work[i]?.promise ?? Promise.resolve(),
    })),
  );
  assert.deepEqual(results, ['started', 'started', 'busy'], 'two slots, not more');
  assert.equal(ex.runningCount(), 2);

  // A third operation that would wait finds the waiting room full (the pool's size): it keeps its slot.
  work[0]?.open();
  await tick();
  const third = gated<string>();
  assert.equal(
    ex.run('hung/3', 'volume_mount', async () => {
      after.push(`hung/3: ${await ex.whileWaiting(() => third.promise)}`);
    }),
    'started',
  );
  await tick();
  assert.equal(ex.waitingCount(), 2);
  assert.equal(ex.runningCount(), 2, 'hung/3 waits holding its slot, other/2 runs');
  assert.equal(
    ex.run('other/3', 'volume_mount', async () => {}),
    'busy',
  );

  // The probe answers: the two waiting operations go on in the slots that free, before anything new.
  probe.open('timed-out');
  await tick();
  assert.deepEqual(after, [], 'no slot free yet: both wait for one');
  assert.equal(ex.waitingCount(), 0);
  work[1]?.open();
  await tick();
  assert.deepEqual(after, ['hung/1: timed-out'], 'the slot other/2 freed went to hung/1');
  third.open('timed-out');
  await tick();
  assert.deepEqual(after, ['hung/1: timed-out', 'hung/3: timed-out', 'hung/2: timed-out']);
  assert.equal(
    ex.run('other/3', 'volume_mount', async () => {}),
    'busy',
    "hung/3's slot went to hung/2",
  );
  assert.equal(ex.runningCount(), 2);
  rest.open();
  await tick();
  assert.equal(
    ex.run('other/3', 'volume_mount', async () => {}),
    'started',
  );
  await ex.drain();
  assert.equal(ex.runningCount(), 0);
  assert.equal(ex.waitingCount(), 0);
});

test('whileWaiting outside an operation just waits; a failed wait still takes its slot back before the operation ends', async () => {
  const ex = new OperationExecutor(Date.now, 1);
  assert.equal(await ex.whileWaiting(async () => 'direct'), 'direct');
  assert.equal(ex.waitingCount(), 0);
  const probe = gated<void>();
  ex.run('a/1', 'volume_unmount', async () => {
    await ex.whileWaiting(() => probe.promise.then(() => Promise.reject(new Error('umount: timed out'))));
  });
  await tick();
  assert.equal(ex.runningCount(), 0);
  const busy = gated<void>();
  assert.equal(
    ex.run('b/1', 'volume_mount', () => busy.promise),
    'started',
  );
  probe.open();
  await tick();
  assert.equal(ex.runningCount(), 1, 'a/1 waits for b/1 to free the only slot');
  busy.open();
  await ex.drain();
  assert.equal(ex.state('a/1')?.lastError?.message, 'umount: timed out');
  assert.equal(ex.runningCount(), 0);
});

test('through the StatProbe: a hostPath-like SetUp whose stat child hangs holds no slot until it answers', async () => {
  const ex = new OperationExecutor(Date.now, 1);
  const children: ((r: RunResult) => void)[] = [];
  const runner: CommandRunner = () => new Promise<RunResult>((resolve) => children.push(resolve));
  const probe = new StatProbe({ runner, timeoutMs: 50, whileWaiting: (wait) => ex.whileWaiting(wait) });
  const states: string[] = [];
  ex.run('hung/h', 'volume_mount', async () => {
    states.push((await probe.stat('/hung/x', { follow: true })).state);
  });
  await tick();
  assert.equal(children.length, 1, 'the probe runs');
  assert.equal(ex.runningCount(), 0);
  let ran = false;
  assert.equal(
    ex.run('other/e', 'volume_mount', async () => {
      ran = true;
    }),
    'started',
    'the only slot is free for another pod',
  );
  await tick();
  assert.ok(ran);
  const exited = Promise.withResolvers<void>();
  children[0]?.({
    exitCode: undefined,
    signal: undefined,
    output: '',
    timedOut: true,
    spawnErrorCode: undefined,
    exited: exited.promise,
  });
  await ex.drain();
  assert.deepEqual(states, ['timed-out']);
  // A retry while the child lives gets the timed-out answer at once: nothing to wait on, the slot is kept.
  let waitingDuringRetry = -1;
  ex.run('hung/h', 'volume_refresh', async () => {
    const st = probe.stat('/hung/x', { follow: true });
    waitingDuringRetry = ex.waitingCount();
    states.push((await st).state);
  });
  await ex.drain();
  assert.equal(waitingDuringRetry, 0);
  assert.deepEqual(states, ['timed-out', 'timed-out']);
  assert.equal(children.length, 1);
  exited.resolve();
});

test("a device's operations: whole-device ones (mount, UnmountDevice) run alone, its pods' unmounts side by side", async () => {
  const ex = new OperationExecutor(Date.now, 16);
  const gates: (() => void)[] = [];
  const held = () =>
    new Promise<void>((r) => {
      gates.push(r);
    });
  const dev = 'kubernetes.io/csi/d^h';
  const whole = { name: dev, perPod: false };
  const perPod = { name: dev, perPod: true };
  // Two pods' unpublishes of the same volume run together.
  assert.deepEqual(
    ex.offer([
      { key: 'a/v', operationName: 'volume_unmount', fn: held, device: perPod },
      { key: 'b/v', operationName: 'volume_unmount', fn: held, device: perPod },
      // Neither a third pod's mount nor the UnmountDevice while they run.
      { key: 'c/v', operationName: 'volume_mount', fn: held, device: whole },
      { key: dev, operationName: 'unmount_device', fn: held, device: whole },
      // Another device is not held back.
      { key: 'c/w', operationName: 'volume_mount', fn: held, device: { name: 'other', perPod: false } },
    ]),
    ['started', 'started', 'already-pending', 'already-pending', 'started'],
  );
  for (const g of gates.splice(0)) g();
  await ex.drain();
  // A whole-device operation running holds back every other of its device, per pod or not.
  assert.deepEqual(
    ex.offer([
      { key: dev, operationName: 'unmount_device', fn: held, device: whole },
      { key: 'c/v', operationName: 'volume_mount', fn: held, device: whole },
      { key: 'a/v', operationName: 'volume_unmount', fn: held, device: perPod },
    ]),
    ['started', 'already-pending', 'already-pending'],
  );
  for (const g of gates.splice(0)) g();
  await ex.drain();
  assert.equal(
    ex.run('c/v', 'volume_mount', async () => {}),
    'started',
    'released once it ended',
  );
  await ex.drain();
});
