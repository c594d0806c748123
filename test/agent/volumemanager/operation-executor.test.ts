import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OperationExecutor } from '../../../src/agent/volumemanager/operation-executor.ts';

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

test('the pool bounds operations running at once; one key group gets at most half of it', async () => {
  const ex = new OperationExecutor(Date.now, 4);
  const release: (() => void)[] = [];
  const op = () => new Promise<void>((r) => release.push(r));
  assert.equal(ex.run('a/1', 'volume_mount', op), 'started');
  assert.equal(ex.run('a/2', 'volume_mount', op), 'started');
  assert.equal(ex.run('a/3', 'volume_mount', op), 'busy', 'pod a has half the pool');
  assert.equal(ex.run('b/1', 'volume_mount', op), 'started');
  assert.equal(ex.run('c/1', 'volume_mount', op), 'started');
  assert.equal(ex.run('d/1', 'volume_mount', op), 'busy', 'the pool is full');
  assert.equal(ex.runningCount(), 4);
  assert.equal(ex.state('d/1'), undefined, 'a busy refusal is not an attempt');
  release.shift()?.();
  await new Promise((r) => setImmediate(r));
  assert.equal(ex.run('a/3', 'volume_mount', op), 'started');
  for (const r of release.splice(0)) r();
  await ex.drain();
  assert.equal(ex.runningCount(), 0);
});
