// Issue 15's findings 1-3 against the volume manager and the real plugins
// (fake mounter, real files): teardown and orphan clean-up while a "container"
// swaps directories for symlinks, a pre-existing symlink in the pod directory,
// and a mountPath of `..`.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { tempDir } from '../../helpers/mountns.ts';
import { at } from '../../helpers/must.ts';
import { precious, startSwapper } from '../../helpers/swapper.ts';
import { harness, pod } from './harness.ts';

async function fillTree(dir: string): Promise<void> {
  for (let k = 0; k < 4; k++) {
    await mkdir(join(dir, `sub${k}/deeper`), { recursive: true });
    for (let i = 0; i < 5; i++) await writeFile(join(dir, `sub${k}/deeper/f${i}`), 'x');
  }
}

test('finding 1: tearing down an emptyDir a container is still swapping never deletes outside it', async (t) => {
  const outside = await tempDir(t);
  const intact = await precious(outside);
  const rounds = Number(process.env.PODVOL_RACE_ITERATIONS ?? 30) / 3;
  for (let r = 0; r < rounds; r++) {
    const uid = `race-${r}`;
    const h = await harness(t, [pod(uid, [{ name: 'data', emptyDir: {} }])]);
    h.setReady(true);
    await h.settle();
    const vol = join(h.root, `pods/${uid}/volumes/kubernetes.io~empty-dir/data`);
    await fillTree(vol);
    const swapper = startSwapper(t, vol, outside);
    h.setPods([]);
    await h.settle();
    swapper.kill('SIGKILL');
    assert.ok(intact(), `round ${r}: a file outside the volume was deleted`);
  }
});

test('finding 1: orphan clean-up of an unknown pod directory never follows a symlink in it', async (t) => {
  const outside = await tempDir(t);
  const intact = await precious(outside);
  const h = await harness(t, []);
  const orphan = join(h.root, 'pods/orphan/volumes/kubernetes.io~empty-dir/v');
  await mkdir(orphan, { recursive: true });
  await mkdir(join(h.root, 'podvol/pods/orphan'), { recursive: true }); // podvol's own (records.ts)
  await symlink(outside, join(orphan, 'link'));
  await symlink(outside, join(h.root, 'pods/orphan/volumes/kubernetes.io~secret'));
  h.setReady(true);
  await h.settle();
  assert.ok(intact());
  assert.ok(!existsSync(join(h.root, 'pods/orphan')), 'the orphan (and its symlinks, as links) was removed');
});

test('finding 3: a symlink planted in the pod directory is refused at SetUp and TearDown', async (t) => {
  const outside = await tempDir(t);
  const intact = await precious(outside);
  await mkdir(join(outside, 'data'));
  const h = await harness(t, []);
  await mkdir(join(h.root, 'pods/p/volumes'), { recursive: true });
  await symlink(outside, join(h.root, 'pods/p/volumes/kubernetes.io~empty-dir'));
  const modeBefore = (await stat(join(outside, 'data'))).mode;
  h.setPods([pod('p', [{ name: 'data', emptyDir: {} }])]);
  await h.settle();
  const v = at(at(h.vm.status(), 0).volumes, 0);
  assert.notEqual(v.state, 'mounted');
  assert.equal(v.reason, 'UnsafePath');
  assert.equal((await stat(join(outside, 'data'))).mode, modeBefore, 'no chmod through the symlink');
  h.setReady(true);
  h.setPods([]);
  await h.settle();
  assert.ok(intact(), 'teardown deleted nothing outside');
  assert.ok(existsSync(join(outside, 'data')));
});

test('finding 2: a mountPath of .. cannot make a nested mount point outside the volume', async (t) => {
  const h = await harness(t, []);
  const p = pod('p', [
    { name: 'info', downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
    { name: 'x', emptyDir: {} },
  ]);
  const c = p.spec?.containers[0];
  assert.ok(c);
  c.volumeMounts = [
    { name: 'info', mountPath: '..' },
    { name: 'x', mountPath: '../../../../escaped-by-podvol' },
  ];
  h.setReady(true);
  h.setPods([p]);
  await h.settle();
  const info = at(h.vm.status(), 0).volumes.find((v) => v.name === 'info');
  assert.equal(info?.reason, 'InvalidPath');
  const everywhere = [h.root, join(h.root, 'pods'), join(h.root, 'pods/p'), join(h.root, 'pods/p/volumes')];
  for (const d of everywhere) assert.ok(!(await readdir(d)).includes('escaped-by-podvol'), d);
  assert.ok(!existsSync('/escaped-by-podvol'));
});

test('settle guard: a first sync that would tear down most adopted volumes is held, then re-checked', async (t) => {
  const first = await harness(t, [pod('a', [{ name: 'db', emptyDir: {} }])]);
  first.setReady(true);
  await first.settle();
  const db = join(first.root, 'pods/a/volumes/kubernetes.io~empty-dir/db');
  await writeFile(join(db, 'data'), 'precious');

  // Restarted with sources that list no pods at all (say, a wrong --node-name).
  const clock = fakeClock(1_000_000);
  const h = await harness(t, [], { root: first.root, clock, settlePeriodMs: 30_000 });
  h.setReady(true);
  await h.settle();
  assert.equal(h.vm.asw.get('a/db')?.state, 'uncertain', 'adopted, still there');
  const hold = h.vm.teardownHold();
  assert.deepEqual({ volumes: hold?.toTearDown, adopted: hold?.adopted }, { volumes: 1, adopted: 1 });
  assert.ok(existsSync(join(db, 'data')), 'nothing torn down while held');

  // The sources come round (the pod is listed again): the hold is released, nothing torn down.
  await clock.advance(10_000);
  h.setPods([pod('a', [{ name: 'db', emptyDir: {} }])]);
  await h.settle();
  assert.equal(h.vm.teardownHold(), undefined);
  assert.equal(h.vm.asw.get('a/db')?.state, 'mounted');
  assert.ok(existsSync(join(db, 'data')));
});

test('settle guard: after the settle period a teardown still wanted goes ahead', async (t) => {
  const first = await harness(t, [pod('a', [{ name: 'db', emptyDir: {} }])]);
  first.setReady(true);
  await first.settle();
  const clock = fakeClock(1_000_000);
  const h = await harness(t, [], { root: first.root, clock, settlePeriodMs: 30_000 });
  h.setReady(true);
  await h.settle();
  assert.ok(h.vm.teardownHold());
  await clock.advance(31_000);
  await h.settle();
  assert.equal(h.vm.teardownHold(), undefined);
  assert.equal(h.vm.asw.get('a/db'), undefined, 'torn down');
  await clock.advance(3_000); // the next housekeeping removes the pod directory
  await h.settle();
  assert.ok(!existsSync(join(first.root, 'pods/a')), 'and its directory removed');
});

test('a pod directory podvol did not create or adopt is never reconstructed or removed', async (t) => {
  const h = await harness(t, []);
  const foreign = join(h.root, 'pods/foreign/volumes/kubernetes.io~empty-dir/db');
  await mkdir(foreign, { recursive: true });
  await writeFile(join(foreign, 'data'), 'theirs');
  const again = await harness(t, [], { root: h.root });
  assert.equal(again.vm.asw.all().length, 0, 'not reconstructed');
  again.setReady(true);
  await again.settle();
  assert.ok(existsSync(join(foreign, 'data')), 'not removed');
});
