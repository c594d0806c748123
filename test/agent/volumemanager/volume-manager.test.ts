// The reconciler against the fake mounter: ordering, gating and idempotence,
// without real mounts.
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { canonicalJSON } from '../../../src/agent/canonical-json.ts';
import { VolumeManager } from '../../../src/agent/volumemanager/volume-manager.ts';
import { probeVolumePlugins } from '../../../src/plugins/index.ts';
import { createVolumeHost } from '../../../src/volumehost/host.ts';
import { VolumePluginMgr } from '../../../src/volumehost/plugin-manager.ts';

import { waitFor } from '../../helpers/daemon.ts';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { at } from '../../helpers/must.ts';
import { harness, pod } from './harness.ts';

test('a running manager acts on a change at once, and removes a pod directory with its last volume', async (t) => {
  // The manager's clock never moves: no loop tick and no housekeeping period comes, only the changes themselves can act.
  const h = await harness(t, [], { clock: fakeClock() });
  h.setReady(true);
  await h.vm.start();
  t.after(() => h.vm.stop());
  h.setPods([pod('a', [{ name: 'scratch', emptyDir: {} }])]);
  await waitFor('the volume set up', () => h.vm.asw.get('a/scratch')?.state === 'mounted');
  h.setPods([]);
  await waitFor('the pod directory removed', () =>
    stat(join(h.root, 'pods/a')).then(
      () => false,
      () => true,
    ),
  );
  assert.deepEqual(h.vm.status(), []);
});

test("the loop ticks on the manager's clock: a pass at each loop period, none before", async (t) => {
  const clock = fakeClock();
  const h = await harness(t, [pod('a', [{ name: 'scratch', emptyDir: {} }])], { clock, loopPeriodMs: 1000 });
  h.setReady(true);
  await h.vm.start();
  t.after(() => h.vm.stop());
  await clock.advance(999);
  assert.equal(h.vm.executor.isPending('a/scratch'), false, 'no pass before the period');
  assert.equal(h.vm.asw.get('a/scratch'), undefined);
  await clock.advance(1);
  await waitFor('the volume set up by the tick', () => h.vm.asw.get('a/scratch')?.state === 'mounted');
  // stop() cancels the next tick on the clock.
  await h.vm.stop();
  assert.equal(clock.pending(), 0, 'no timer left after stop()');
});

test('volumes are set up before the sources sync, but nothing is torn down until they have', async (t) => {
  const h = await harness(t, [pod('a', [{ name: 'scratch', emptyDir: {} }])]);
  await h.settle();
  const dir = join(h.root, 'pods/a/volumes/kubernetes.io~empty-dir/scratch');
  assert.ok((await stat(dir)).isDirectory());
  assert.equal(at(at(h.vm.status(), 0).volumes, 0).state, 'mounted');

  h.setPods([]);
  await h.settle();
  assert.ok((await stat(dir)).isDirectory(), 'not torn down while sources have not synced');
  h.setReady(true);
  await h.settle();
  await assert.rejects(stat(dir), { code: 'ENOENT' });
  assert.deepEqual(h.vm.status(), []);
});

test('the same pod delivered with its keys in another order is not remounted', async (t) => {
  const h = await harness(t, [pod('a', [{ name: 'data', emptyDir: { sizeLimit: '1Gi', medium: '' } }])]);
  h.setReady(true);
  await h.settle();
  const marker = join(h.root, 'pods/a/volumes/kubernetes.io~empty-dir/data/marker');
  await writeFile(marker, 'kept');
  const reordered = JSON.parse(
    canonicalJSON(pod('a', [{ emptyDir: { medium: '', sizeLimit: '1Gi' }, name: 'data' }])),
  );
  h.setPods([reordered]);
  await h.settle();
  assert.equal(await readFile(marker, 'utf8'), 'kept', 'the volume was not torn down and set up again');
  assert.equal(h.vm.asw.get('a/data')?.state, 'mounted');
});

test('a changed volume spec under the same pod UID never unmounts: it waits for the pod to be recreated', async (t) => {
  const h = await harness(t, [pod('a', [{ name: 'v', emptyDir: {} }])]);
  h.setReady(true);
  await h.settle();
  await mkdir(join(h.root, 'elsewhere'));
  h.setPods([pod('a', [{ name: 'v', hostPath: { path: join(h.root, 'elsewhere'), type: 'Directory' } }])]);
  await h.settle();
  assert.ok(
    (await stat(join(h.root, 'pods/a/volumes/kubernetes.io~empty-dir/v'))).isDirectory(),
    'still there',
  );
  assert.equal(h.vm.asw.get('a/v')?.pluginName, 'kubernetes.io/empty-dir');
  const v = h.vm.podStatus('a')?.volumes.find((x) => x.name === 'v');
  assert.equal(v?.state, 'mounted');
  assert.equal(v?.reason, 'SpecChangeRequiresRestart');
  // The pod recreated (a new UID) gets the new spec.
  h.setPods([pod('b', [{ name: 'v', hostPath: { path: join(h.root, 'elsewhere'), type: 'Directory' } }])]);
  await h.settle();
  await assert.rejects(stat(join(h.root, 'pods/a/volumes/kubernetes.io~empty-dir/v')), { code: 'ENOENT' });
  assert.equal(h.vm.asw.get('b/v')?.pluginName, 'kubernetes.io/host-path');
});

test('a changed downwardAPI spec under the same pod UID is re-rendered in place', async (t) => {
  const dapi = (path: string) => [
    { name: 'info', downwardAPI: { items: [{ path, fieldRef: { fieldPath: 'metadata.name' } }] } },
  ];
  const h = await harness(t, [pod('a', dapi('one'))]);
  h.setReady(true);
  await h.settle();
  const dir = join(h.root, 'pods/a/volumes/kubernetes.io~downward-api/info');
  assert.equal(await readFile(join(dir, 'one'), 'utf8'), 'p-a');
  h.setPods([pod('a', dapi('two'))]);
  await h.settle();
  assert.equal(await readFile(join(dir, 'two'), 'utf8'), 'p-a');
  await assert.rejects(stat(join(dir, 'one')), { code: 'ENOENT' });
  assert.equal(h.vm.podStatus('a')?.volumes[0]?.reason, '');
});

test('a restart reconstructs volumes from disk as uncertain and adopts them', async (t) => {
  const h = await harness(t, [pod('a', [{ name: 'scratch', emptyDir: {} }])]);
  h.setReady(true);
  await h.settle();
  const again = new VolumeManager({
    rootDir: h.root,
    host: createVolumeHost({
      rootDir: h.root,
      nodeName: 'n',
      mounter: h.mounter,
      pluginMgr: new VolumePluginMgr(),
    }),
    pluginMgr: (() => {
      const m = new VolumePluginMgr();
      m.initPlugins(
        probeVolumePlugins(),
        createVolumeHost({ rootDir: h.root, nodeName: 'n', mounter: h.mounter, pluginMgr: m }),
      );
      return m;
    })(),
    mounter: h.mounter,
    logger: pino({ level: 'silent' }),
    pods: () => [pod('a', [{ name: 'scratch', emptyDir: {} }])],
    sourcesReady: () => true,
  });
  await again.reconstruct();
  const v = again.asw.get('a/scratch');
  assert.equal(v?.state, 'uncertain');
  assert.equal(v?.specExact, true, 'the record on disk gives the exact spec');
  await again.reconcileOnce();
  await again.executor.drain();
  assert.equal(again.asw.get('a/scratch')?.state, 'mounted');
});

test('after a restart, a volume whose spec changed under the same UID is confirmed mounted as it was, and the pod is ready', async (t) => {
  const sized = (sizeLimit: string) =>
    pod('a', [
      { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit } },
      { name: 'scratch', emptyDir: {} },
    ]);
  const first = await harness(t, [sized('16Mi')]);
  first.setReady(true);
  await first.settle();
  first.setPods([sized('32Mi')]);
  await first.settle();
  assert.equal(first.vm.podStatus('a')?.volumes[0]?.reason, 'SpecChangeRequiresRestart');
  const tmpfsMounts = first.mounter.callsOf('mount').length;

  // podvol restarts (its mounts stay) and finds the edited pod.
  const again = await harness(t, [sized('32Mi')], { root: first.root, mounter: first.mounter });
  assert.equal(again.vm.asw.get('a/cache')?.state, 'uncertain');
  again.setReady(true);
  await again.settle();
  const cache = again.vm.podStatus('a')?.volumes.find((v) => v.name === 'cache');
  assert.equal(cache?.state, 'mounted', JSON.stringify(cache));
  assert.equal(cache?.reason, 'SpecChangeRequiresRestart');
  assert.ok(
    again.vm.podStatus('a')?.volumes.every((v) => v.state === 'mounted'),
    'every volume of the pod is mounted',
  );
  assert.equal(again.vm.asw.get('a/cache')?.spec.volume?.emptyDir?.sizeLimit, '16Mi', 'as it was mounted');
  assert.equal(again.mounter.callsOf('mount').length, tmpfsMounts, 'the tmpfs was not mounted again');
});

test('a volume not yet mounted gets a free slot of the pool before refreshes of mounted ones', async (t) => {
  const dapi = (name: string) => ({
    name,
    downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] },
  });
  const many = Array.from({ length: 12 }, (_, i) => dapi(`v${i}`));
  const h = await harness(t, [pod('a', many)]);
  h.setReady(true);
  // The pool lets one pod run a few operations at a time: settle until all are mounted.
  for (let i = 0; i < 10 && h.vm.asw.all().filter((v) => v.state === 'mounted').length < 12; i++)
    await h.settle();
  assert.equal(h.vm.asw.all().length, 12);
  // Every mounted volume is due its periodic refresh, and the pod gains a volume.
  h.vm.asw.markRemountRequired(() => true);
  h.setPods([pod('a', [...many, dapi('late')])]);
  await h.vm.reconcileOnce();
  assert.equal(h.vm.executor.isPending('a/late'), true, 'the new volume was started in the first pass');
  await h.vm.executor.drain();
});

test('the operation pool is work-conserving: a pod alone has every slot; once another pod waits, it gets the next free one', async (t) => {
  const dapi = (name: string) => ({
    name,
    downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] },
  });
  const volumes = (n: number) => Array.from({ length: n }, (_, i) => dapi(`v${i}`));
  const h = await harness(t, [pod('three', volumes(3))], { maxConcurrentOperations: 4 });
  // Every tmpfs mount waits until the test lets it through, so the test sees what the pool started.
  const gates = new Map<string, () => void>();
  const mount = h.mounter.mount.bind(h.mounter);
  h.mounter.mount = async (source, target, ...rest) => {
    await new Promise<void>((r) => gates.set(target, r));
    return mount(source, target, ...rest);
  };
  const volumeDir = (uid: string, name: string) =>
    join(h.root, 'pods', uid, 'volumes', 'kubernetes.io~downward-api', name);
  const running = (uid: string) =>
    [...Array(12).keys()].filter((i) => h.vm.executor.isPending(`${uid}/v${i}`)).length;
  /** Lets a volume's mount through and waits for its operation to end. */
  const finish = async (uid: string, name: string) => {
    const dir = volumeDir(uid, name);
    (await waitFor(`the mount of ${uid}/${name}`, () => gates.get(dir), 60_000))();
    gates.delete(dir);
    await waitFor(
      `${uid}/${name} mounted`,
      () => h.vm.asw.get(`${uid}/${name}`)?.state === 'mounted',
      60_000,
    );
    await waitFor(`${uid}/${name} done`, () => !h.vm.executor.isPending(`${uid}/${name}`), 60_000);
  };
  h.setReady(true);

  await h.vm.reconcileOnce();
  assert.equal(running('three'), 3, 'a 3-volume pod alone is set up in one round, not two');
  for (const v of ['v0', 'v1', 'v2']) await finish('three', v);

  // A pod with many volumes alone takes the whole pool.
  h.setPods([pod('three', volumes(3)), pod('big', volumes(10))]);
  await h.vm.reconcileOnce();
  assert.equal(running('big'), 4);
  // Another pod arrives while the pool is full: it waits, then gets each slot that frees until it has
  // half the pool, while the pod beyond half gets none.
  h.setPods([pod('three', volumes(3)), pod('big', volumes(10)), pod('small', volumes(3))]);
  await h.vm.reconcileOnce();
  assert.equal(running('small'), 0, 'the pool is full');
  await finish('big', 'v0');
  await h.vm.reconcileOnce();
  assert.deepEqual([running('big'), running('small')], [3, 1], 'the free slot went to the pod that waited');
  await finish('big', 'v1');
  await h.vm.reconcileOnce();
  assert.deepEqual([running('big'), running('small')], [2, 2]);
  assert.equal(h.vm.executor.isPending('big/v4'), false);

  // Let everything through: every volume of every pod ends up mounted.
  h.mounter.mount = mount;
  for (const r of gates.values()) r();
  for (let i = 0; i < 10 && h.vm.asw.all().filter((v) => v.state === 'mounted').length < 16; i++)
    await h.settle();
  assert.equal(h.vm.asw.all().filter((v) => v.state === 'mounted').length, 16);
});

test('a pod desired again while its volumes are torn down is not ready until they are set up afresh', async (t) => {
  const h = await harness(t, [pod('a', [{ name: 'mem', emptyDir: { medium: 'Memory' } }])]);
  h.setReady(true);
  await h.settle();
  assert.equal(at(at(h.vm.status(), 0).volumes, 0).state, 'mounted');
  // The teardown waits, at its mount-point check, until the test lets it through.
  let release: (() => void) | undefined;
  const check = h.mounter.isLikelyNotMountPoint.bind(h.mounter);
  h.mounter.isLikelyNotMountPoint = async (path) => {
    await new Promise<void>((r) => {
      release = r;
    });
    return check(path);
  };
  h.setPods([]);
  await h.vm.reconcileOnce();
  await waitFor('the teardown started', () => release, 60_000);
  h.mounter.isLikelyNotMountPoint = check;
  // The same pod (the same UID) comes back while its volume is being unmounted.
  h.setPods([pod('a', [{ name: 'mem', emptyDir: { medium: 'Memory' } }])]);
  await h.vm.reconcileOnce();
  const during = at(at(h.vm.status(), 0).volumes, 0);
  assert.equal(during.state, 'unmounting', 'a volume going away is not reported ready');
  release?.();
  await h.settle();
  assert.equal(at(at(h.vm.status(), 0).volumes, 0).state, 'mounted');
});
