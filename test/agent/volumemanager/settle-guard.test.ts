// Issue 21 finding 9: the settle guard holds a first sync's teardown when the
// pod sources look broken (they deliver nothing, or a fraction of what was
// adopted), not when pods were replaced while podvol was down. Each case
// restarts a volume manager on a root holding the adopted pods' emptyDirs,
// with the sources delivering what the case says, and the settle period long.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { ApiPodSource } from '../../../src/agent/pods/api-source.ts';
import { createStaticPodSource } from '../../../src/agent/pods/static-source.ts';
import type { PodSource } from '../../../src/agent/pods/types.ts';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { tempDir } from '../../helpers/mountns.ts';
import { at } from '../../helpers/must.ts';
import { kubeEnv } from '../../volumehost/kube/env.ts';
import { harness, pod } from './harness.ts';

const withData = (uid: string) => pod(uid, [{ name: 'data', emptyDir: {} }]);
const pods = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => withData(`${prefix}${i}`));

/** A podvol that had `adopted` mounted, restarted with sources that deliver `desired`. */
async function restart(t: TestContext, adopted: V1Pod[], desired: V1Pod[]) {
  const first = await harness(t, adopted);
  first.setReady(true);
  // settle() runs a few passes; the pool mounts a few volumes per pass.
  while (first.vm.asw.all().length < adopted.length) await first.settle();
  const clock = fakeClock(1_000_000);
  const h = await harness(t, desired, { root: first.root, clock, settlePeriodMs: 30_000 });
  assert.equal(h.vm.asw.all().length, adopted.length, 'every volume adopted');
  h.setReady(true);
  await h.settle();
  const mounted = (p: V1Pod) => h.vm.asw.get(`${p.metadata?.uid}/data`) !== undefined;
  return { ...h, mounted, later: (ms: number) => clock.advance(ms) };
}

/** The pods a source delivers once it has synced. */
async function synced(t: TestContext, src: PodSource): Promise<V1Pod[]> {
  t.after(() => src.stop());
  await src.start();
  assert.ok(src.hasSynced(), 'the source reports synced: nothing but the guard stands before the teardown');
  return src.pods();
}

describe('settle guard: ordinary replacement is not held', () => {
  test('4 adopted pods all replaced by 4 new ones: the old ones are torn down at once', async (t) => {
    const old = pods('old-', 4);
    const fresh = pods('new-', 4);
    const h = await restart(t, old, fresh);
    assert.equal(h.vm.teardownHold(), undefined);
    assert.deepEqual(old.filter(h.mounted), [], 'old pods torn down');
    assert.equal(fresh.filter(h.mounted).length, 4, 'new pods set up');
  });

  test('40 adopted pods all replaced by 40 new ones: the old ones are torn down at once', async (t) => {
    const old = pods('old-', 40);
    const h = await restart(t, old, pods('new-', 40));
    assert.equal(h.vm.teardownHold(), undefined);
    // A pass offers a pool's worth of unmounts; 40 take a few rounds of settle().
    for (let i = 0; i < 20 && old.some(h.mounted); i++) await h.settle();
    assert.deepEqual(old.filter(h.mounted), []);
  });

  test('1 adopted pod replaced by 1 new one: not held', async (t) => {
    const old = withData('old');
    const h = await restart(t, [old], [withData('new')]);
    assert.equal(h.vm.teardownHold(), undefined);
    assert.equal(h.mounted(old), false);
  });
});

describe('settle guard: a source that looks broken is held', () => {
  const assertHeld = (h: Awaited<ReturnType<typeof restart>>, old: V1Pod[]) => {
    const hold = h.vm.teardownHold();
    assert.ok(hold, 'teardown held');
    assert.equal(hold.adopted, old.length);
    assert.equal(old.filter(h.mounted).length, old.length, 'nothing torn down while held');
  };

  test('a wrong --pod-manifest-path (a directory that does not exist) delivers 0 pods', async (t) => {
    const desired = await synced(
      t,
      createStaticPodSource({
        dir: join(await tempDir(t), 'no-such-dir'),
        nodeName: 'n',
        logger: pino({ level: 'silent' }),
      }),
    );
    const old = pods('a-', 4);
    assertHeld(await restart(t, old, desired), old);
  });

  test('an empty manifest directory (a manifest disk not mounted yet) delivers 0 pods', async (t) => {
    const desired = await synced(
      t,
      createStaticPodSource({ dir: await tempDir(t), nodeName: 'n', logger: pino({ level: 'silent' }) }),
    );
    const old = pods('a-', 4);
    assertHeld(await restart(t, old, desired), old);
  });

  test('an API server with no pods for this node (a kubeconfig for another cluster) delivers 0 pods', async (t) => {
    const { kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'elsewhere' },
        spec: { nodeName: 'other', containers: [{ name: 'c', image: 'i' }] },
      },
    });
    const desired = await synced(t, new ApiPodSource({ kubeConfig: kc, nodeName: 'n' }));
    const old = pods('a-', 4);
    assertHeld(await restart(t, old, desired), old);
  });

  test('100 adopted pods and the sources deliver 1 unrelated pod: lost nearly everything at once', async (t) => {
    const old = pods('old-', 100);
    assertHeld(await restart(t, old, [withData('new')]), old);
  });

  test('a still-desired adopted pod does not lift the hold when most of the rest is gone', async (t) => {
    // Two sources, one right (its static pod survives), one delivering nothing.
    const old = pods('a-', 10);
    const h = await restart(t, old, old.slice(0, 2));
    assertHeld(h, old);
  });

  test('held, then the sources deliver as many pods again: released, and only what they no longer want goes', async (t) => {
    const old = pods('old-', 4);
    const h = await restart(t, old, []);
    assertHeld(h, old);
    await h.later(10_000);
    const back = [at(old, 0), ...pods('new-', 3)];
    h.setPods(back);
    await h.settle();
    assert.equal(h.vm.teardownHold(), undefined, 'released before the settle period ended');
    assert.deepEqual(
      old.filter(h.mounted),
      [at(old, 0)],
      'the pod still desired kept, the replaced ones torn down',
    );
  });
});
