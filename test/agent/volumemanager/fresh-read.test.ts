import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freshRead } from '../../../src/agent/volumemanager/fresh-read.ts';

/** A read whose every call is started and finished by hand. */
function manualReads() {
  const started: { n: number; finish: (v: number) => void; fail: (e: Error) => void }[] = [];
  const readNow = () =>
    new Promise<number>((resolve, reject) => {
      started.push({ n: started.length + 1, finish: resolve, fail: reject });
    });
  return { started, readNow };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

test('a read with none running starts at once', async () => {
  const m = manualReads();
  const r = freshRead(m.readNow);
  const a = r.read();
  assert.equal(m.started.length, 1);
  m.started[0]?.finish(1);
  assert.equal(await a, 1);
});

test('callers that ask while a read runs share the next one, begun after the running one', async () => {
  const m = manualReads();
  const r = freshRead(m.readNow);
  const first = r.read();
  // These asked after the first read began: it may miss what they must see.
  const second = r.read();
  const third = r.read();
  await tick();
  assert.equal(m.started.length, 1, 'the next read waits for the running one');
  m.started[0]?.finish(1);
  assert.equal(await first, 1);
  await tick();
  assert.equal(m.started.length, 2, 'one read for both waiting callers');
  // Asked after the second read began: a third read.
  const fourth = r.read();
  m.started[1]?.finish(2);
  assert.equal(await second, 2);
  assert.equal(await third, 2);
  await tick();
  assert.equal(m.started.length, 3);
  m.started[2]?.finish(3);
  assert.equal(await fourth, 3);
  // Nothing running: a new read starts at once.
  const fifth = r.read();
  assert.equal(m.started.length, 4);
  m.started[3]?.finish(4);
  assert.equal(await fifth, 4);
});

test('a failed read fails its callers only; the waiting ones get the next read', async () => {
  const m = manualReads();
  const r = freshRead(m.readNow);
  const first = r.read();
  const second = r.read();
  m.started[0]?.fail(new Error('torn'));
  await assert.rejects(first, /torn/);
  await tick();
  m.started[1]?.finish(2);
  assert.equal(await second, 2);
});
