// A job that runs one at a time and once more when asked while it runs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rerunWhileAsked } from '../../src/agent/rerun.ts';

/** A job whose runs each wait to be released; counts how many started. */
function gatedJob() {
  const releases: Array<() => void> = [];
  let started = 0;
  const job = () =>
    new Promise<void>((resolve) => {
      started++;
      releases.push(resolve);
    });
  const releaseNext = async () => {
    await new Promise((r) => setImmediate(r));
    releases.shift()?.();
  };
  return { job, releaseNext, started: () => started };
}

test('calls while a run is running make one more run after it, not one each', async () => {
  const g = gatedJob();
  const r = rerunWhileAsked(g.job);
  const first = r.run();
  const second = r.run();
  const third = r.run();
  assert.equal(g.started(), 1, 'never two runs at once');
  await g.releaseNext();
  await g.releaseNext();
  await Promise.all([first, second, third]);
  assert.equal(g.started(), 2);
  assert.equal(r.running(), undefined);
});

test('every caller waits until the run that saw its request is done', async () => {
  const g = gatedJob();
  const r = rerunWhileAsked(g.job);
  void r.run();
  let lateDone = false;
  const late = r.run().then(() => {
    lateDone = true;
  });
  await g.releaseNext();
  await new Promise((res) => setImmediate(res));
  assert.equal(lateDone, false, 'the first run ended, the one for the late request has not');
  await g.releaseNext();
  await late;
});

test('a stopped owner gets no further run, and idle is told when the last run ends', async () => {
  const g = gatedJob();
  let stopped = false;
  let idle = 0;
  const r = rerunWhileAsked(g.job, { stopped: () => stopped, idle: () => idle++ });
  const first = r.run();
  void r.run();
  stopped = true;
  await g.releaseNext();
  await first;
  assert.equal(g.started(), 1);
  assert.equal(idle, 1);
});
