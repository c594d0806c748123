// emptyDir usage: measured as du does, at most once per volume stats period,
// shown in /status with the sizeLimit; exceeding the limit is a Warning Event
// and reason SizeLimitExceeded (kubelet would evict the pod; podvol reports).
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { at } from '../../helpers/must.ts';
import { harness, pod as podOf } from './harness.ts';

const pod = podOf('stats-1', [
  { name: 'small', emptyDir: { sizeLimit: '16Ki' } },
  { name: 'free', emptyDir: {} },
]);

test('emptyDir usage and sizeLimit in /status; exceeding it is a Warning Event and SizeLimitExceeded', async (t) => {
  const clock = fakeClock(1_000_000);
  const { root, vm, events, setReady, settle } = await harness(t, [pod], { clock });
  setReady(true);
  await settle();
  const volume = (name: string) => at(vm.status(), 0).volumes.find((v) => v.name === name);
  assert.equal(volume('small')?.state, 'mounted');
  assert.equal(volume('small')?.sizeLimit, '16Ki');
  assert.equal(volume('free')?.sizeLimit, undefined);
  assert.equal(typeof volume('free')?.usedBytes, 'number');

  const dir = join(root, 'pods/stats-1/volumes/kubernetes.io~empty-dir/small');
  await writeFile(join(dir, 'big'), Buffer.alloc(64 * 1024, 1));
  // Within the period nothing is measured again: large trees are not walked more often than kubelet's 1 min.
  await clock.advance(30_000);
  await settle();
  assert.equal(volume('small')?.reason, '');
  await clock.advance(30_000);
  await settle();
  const small = volume('small');
  assert.ok((small?.usedBytes ?? 0) >= 64 * 1024, JSON.stringify(small));
  assert.equal(small?.state, 'mounted');
  assert.equal(small?.reason, 'SizeLimitExceeded');
  assert.equal(small?.message, 'Usage of EmptyDir volume "small" exceeds the limit "16Ki".');
  assert.deepEqual(
    events.map((e) => e.slice(1)),
    [['Warning', 'SizeLimitExceeded', 'Usage of EmptyDir volume "small" exceeds the limit "16Ki".']],
  );
  // Still over at the next measurement: one Event per crossing, not one per minute.
  await clock.advance(60_000);
  await settle();
  assert.equal(events.length, 1);
  assert.equal(volume('free')?.reason, '');
});

test('--volume-stats-agg-period 0 disables the measurement: no usage, no SizeLimitExceeded', async (t) => {
  const clock = fakeClock(1_000_000);
  const { root, vm, setReady, settle } = await harness(t, [pod], {
    clock,
    volumeStatsPeriodMs: 0,
  });
  setReady(true);
  const dir = join(root, 'pods/stats-1/volumes/kubernetes.io~empty-dir/small');
  for (let round = 0; round < 3; round++) {
    await settle();
    if (round === 0) await writeFile(join(dir, 'big'), Buffer.alloc(64 * 1024, 1));
    await clock.advance(120_000);
  }
  const small = at(vm.status(), 0).volumes.find((v) => v.name === 'small');
  assert.equal(small?.state, 'mounted');
  assert.equal(small?.usedBytes, undefined);
  assert.equal(small?.reason, '');
});

test('a mount table that cannot be read leaves usage unmeasured until it can, and rejects nothing', async (t) => {
  const clock = fakeClock(1_000_000);
  const { vm, mounter, setReady, settle } = await harness(t, [pod], { clock });
  const list = mounter.list.bind(mounter);
  let reads = 0;
  let failing = false;
  // What consistentRead throws when mounts change between every two reads (a set-up of 300 pods).
  mounter.list = async () => {
    reads++;
    if (failing)
      throw new Error('could not get consistent content of /proc/self/mountinfo after 10 attempts');
    return list();
  };
  failing = true;
  setReady(true);
  await settle();
  const volume = (name: string) => at(vm.status(), 0).volumes.find((v) => v.name === name);
  assert.equal(volume('small')?.state, 'mounted');
  assert.equal(volume('small')?.usedBytes, undefined, 'not measured while the table cannot be read');
  failing = false;
  reads = 0;
  await clock.advance(60_000);
  await settle();
  assert.equal(typeof volume('small')?.usedBytes, 'number');
  assert.equal(typeof volume('free')?.usedBytes, 'number');
  assert.equal(reads, 1, 'one read of the mount table for both volumes');
});

test("the metrics' samples: each mounted emptyDir's last measurement under its pod's name, the limit in bytes, gone with the pod", async (t) => {
  const clock = fakeClock(1_000_000);
  const { root, vm, setPods, setReady, settle } = await harness(t, [pod], { clock });
  setReady(true);
  await settle();
  await writeFile(
    join(root, 'pods/stats-1/volumes/kubernetes.io~empty-dir/small', 'big'),
    Buffer.alloc(64 * 1024, 1),
  );
  await clock.advance(60_000);
  await settle();
  const samples = vm.stats.samples().sort((a, b) => a.volume.localeCompare(b.volume));
  assert.deepEqual(
    samples.map(({ usedBytes, ...s }) => s),
    [
      { namespace: 'default', pod: 'p-stats-1', volume: 'free' },
      { namespace: 'default', pod: 'p-stats-1', volume: 'small', sizeLimitBytes: 16 * 1024 },
    ],
  );
  assert.ok((at(samples, 1).usedBytes ?? 0) >= 64 * 1024, JSON.stringify(samples));
  setPods([]);
  await settle();
  assert.deepEqual(vm.stats.samples(), []);
});
