// Who uses a staged CSI volume: the plugin's in-memory index, kept by its
// operations and read from the vol_data.json files once at start. The plugin
// runs in this process against the test driver (real gRPC, real mounts).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createLinuxMounter } from '../../../src/mount/linux.ts';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { readCalls } from '../../csi/driver.ts';
import { claimVolume, startHarness } from '../../csi/harness.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

async function harness(t: TestContext) {
  const h = await startHarness(await tempDir(t, 'pv-csi-index-'));
  t.after(() => h.stop());
  const staging = (handle: string) =>
    join(h.root, 'plugins', 'kubernetes.io', 'csi', h.driverName, sha256Hex(handle), 'globalmount');
  const count = (method: string) => readCalls(h.stateDir).filter((c) => c.method === method).length;
  return { h, staging, count };
}

mountTest('two pods on one volume: the first teardown keeps it staged, the last unstages it', async (t) => {
  const { h, staging, count } = await harness(t);
  const a = claimVolume(h, 1, 7);
  const b = claimVolume(h, 2, 7);
  await h.plugin.newMounter(a.spec, a.pod).setUp({});
  await h.plugin.newMounter(b.spec, b.pod).setUp({});
  assert.equal(count('NodeStageVolume'), 1);
  assert.equal(count('NodePublishVolume'), 2);

  await h.plugin.newUnmounter(a.inner, a.uid).tearDown();
  assert.equal(count('NodeUnstageVolume'), 0);
  assert.ok(existsSync(staging('vol-7')));
  await h.plugin.newUnmounter(b.inner, b.uid).tearDown();
  assert.equal(count('NodeUnstageVolume'), 1);
  assert.ok(!existsSync(join(staging('vol-7'), '..')), 'globalmount and its json are gone');
});

mountTest(
  'a pod the desired state has but that has not published yet keeps the volume staged; the sweep unstages it once nothing wants it',
  async (t) => {
    const { h, staging, count } = await harness(t);
    const a = claimVolume(h, 1, 7);
    // Pod 2 wants the same volume: in the desired state, not set up yet.
    const b = claimVolume(h, 2, 7);
    let desired = [b.spec];
    const plugin = h.newPlugin({ desiredVolumes: () => desired });
    await plugin.newMounter(a.spec, a.pod).setUp({});

    await plugin.newUnmounter(a.inner, a.uid).tearDown();
    assert.equal(count('NodeUnpublishVolume'), 1);
    assert.equal(
      count('NodeUnstageVolume'),
      0,
      'kubelet unmounts a device only once the desired state lets it go',
    );
    assert.ok(existsSync(staging('vol-7')));
    assert.deepEqual(await plugin.cleanupOrphanedStagedVolumes(), [], 'still wanted');

    desired = [];
    assert.deepEqual(await plugin.cleanupOrphanedStagedVolumes(), [
      `kubernetes.io/csi/${h.driverName}^vol-7`,
    ]);
    assert.equal(count('NodeUnstageVolume'), 1);
    assert.ok(!existsSync(join(staging('vol-7'), '..')));
  },
);

mountTest(
  'after a restart the index is read from vol_data.json: pods still publishing keep the volume staged',
  async (t) => {
    const { h, staging, count } = await harness(t);
    const a = claimVolume(h, 1, 7);
    const b = claimVolume(h, 2, 7);
    const lone = claimVolume(h, 3);
    for (const v of [a, b, lone]) await h.plugin.newMounter(v.spec, v.pod).setUp({});

    // A new process: nothing in memory, everything on disk.
    const restarted = h.newPlugin();
    assert.deepEqual(await restarted.cleanupOrphanedStagedVolumes(), [], 'every staged volume is in use');
    await restarted.newUnmounter(a.inner, a.uid).tearDown();
    assert.equal(count('NodeUnstageVolume'), 0, 'pod 2 still publishes vol-7');
    await restarted.newUnmounter(b.inner, b.uid).tearDown();
    await restarted.newUnmounter(lone.inner, lone.uid).tearDown();
    assert.deepEqual(
      readCalls(h.stateDir)
        .filter((c) => c.method === 'NodeUnstageVolume')
        .map((c) => c.request.volume_id)
        .sort(),
      ['vol-3', 'vol-7'],
    );
    assert.ok(!existsSync(join(staging('vol-3'), '..')));
  },
);

mountTest(
  'a staged volume whose pods are gone is swept after a restart; a user whose json vanished does not hold an unstage',
  async (t) => {
    const { h, count } = await harness(t);
    const mounter = createLinuxMounter({ systemd: 'off' });
    const a = claimVolume(h, 1);
    const b = claimVolume(h, 2, 2);
    const c = claimVolume(h, 3, 2);
    for (const v of [a, b, c]) await h.plugin.newMounter(v.spec, v.pod).setUp({});
    const podVolumeDir = (v: typeof a) =>
      join(h.root, 'pods', v.uid, 'volumes', 'kubernetes.io~csi', v.inner);
    const removeByHand = async (v: typeof a) => {
      await mounter.unmount(join(podVolumeDir(v), 'mount'));
      await rm(podVolumeDir(v), { recursive: true });
    };

    // A podvol killed between unpublish and unstage of pod 1: only the staging json names vol-1.
    await removeByHand(a);
    const restarted = h.newPlugin();
    assert.deepEqual(await restarted.cleanupOrphanedStagedVolumes(), [
      `kubernetes.io/csi/${h.driverName}^vol-1`,
    ]);
    assert.equal(count('NodeUnstageVolume'), 1);
    assert.deepEqual(await restarted.cleanupOrphanedStagedVolumes(), [], 'nothing left to sweep');

    // Pod 2's directory goes behind podvol's back; the index still lists it, the disk decides.
    await removeByHand(b);
    await restarted.newUnmounter(c.inner, c.uid).tearDown();
    assert.equal(count('NodeUnstageVolume'), 2, 'vol-2 unstaged once its last real user is gone');
  },
);
