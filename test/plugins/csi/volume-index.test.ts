// Who uses a staged CSI volume: the plugin's in-memory index, kept by its
// operations and read from the vol_data.json files once at start, which
// UnmountDevice asks before it unstages, and the staged devices a restarted
// plugin reconstructs. The plugin runs in this process against the test
// driver (real gRPC, real mounts); the volume manager's side (when an
// UnmountDevice runs) is test/agent/csi/unmount-device.e2e.test.ts.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createLinuxMounter } from '../../../src/mount/linux.ts';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { readCalls } from '../../csi/driver.ts';
import { claimVolume, setUpVolume, startHarness, unmountDeviceOf } from '../../csi/harness.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

async function harness(t: TestContext) {
  const h = await startHarness(await tempDir(t, 'pv-csi-index-'));
  t.after(() => h.stop());
  const staging = (handle: string) =>
    join(h.root, 'plugins', 'kubernetes.io', 'csi', h.driverName, sha256Hex(handle), 'globalmount');
  const count = (method: string) => readCalls(h.stateDir).filter((c) => c.method === method).length;
  return { h, staging, count };
}

mountTest(
  'two pods on one volume: staged once; UnmountDevice refuses while a pod publishes, unstages after the last',
  async (t) => {
    const { h, staging, count } = await harness(t);
    const a = claimVolume(h, 1, 7);
    const b = claimVolume(h, 2, 7);
    await setUpVolume(h.plugin, a);
    await setUpVolume(h.plugin, b, { staged: true });
    assert.equal(count('NodeStageVolume'), 1);
    assert.equal(count('NodePublishVolume'), 2);

    await h.plugin.newUnmounter(a.inner, a.uid).tearDown();
    assert.equal(count('NodeUnstageVolume'), 0, 'TearDown never unstages');
    await assert.rejects(unmountDeviceOf(h.plugin, b), { reason: 'StillMounted' });
    assert.equal(count('NodeUnstageVolume'), 0, 'pod 2 still publishes vol-7');
    assert.ok(existsSync(staging('vol-7')));
    await h.plugin.newUnmounter(b.inner, b.uid).tearDown();
    await unmountDeviceOf(h.plugin, b);
    assert.equal(count('NodeUnstageVolume'), 1);
    assert.ok(!existsSync(join(staging('vol-7'), '..')), 'globalmount and its json are gone');
    await unmountDeviceOf(h.plugin, b);
    assert.equal(count('NodeUnstageVolume'), 1, 'a second UnmountDevice finds nothing staged');
  },
);

mountTest(
  'after a restart: the staged devices are reconstructed from their json, pods still publishing keep theirs staged',
  async (t) => {
    const { h, staging, count } = await harness(t);
    const a = claimVolume(h, 1, 7);
    const b = claimVolume(h, 2, 7);
    const lone = claimVolume(h, 3);
    await setUpVolume(h.plugin, a);
    await setUpVolume(h.plugin, b, { staged: true });
    await setUpVolume(h.plugin, lone);

    // A new process: nothing in memory, everything on disk.
    const restarted = h.newPlugin();
    assert.deepEqual(
      (await restarted.constructDeviceSpecs()).map((d) => [d.deviceName, d.deviceMountPath]).sort(),
      [
        [`kubernetes.io/csi/${h.driverName}^vol-3`, staging('vol-3')],
        [`kubernetes.io/csi/${h.driverName}^vol-7`, staging('vol-7')],
      ],
    );
    await restarted.newUnmounter(a.inner, a.uid).tearDown();
    await assert.rejects(unmountDeviceOf(restarted, a), { reason: 'StillMounted' });
    await restarted.newUnmounter(b.inner, b.uid).tearDown();
    await restarted.newUnmounter(lone.inner, lone.uid).tearDown();
    await unmountDeviceOf(restarted, a);
    await unmountDeviceOf(restarted, lone);
    assert.deepEqual(
      readCalls(h.stateDir)
        .filter((c) => c.method === 'NodeUnstageVolume')
        .map((c) => c.request.volume_id)
        .sort(),
      ['vol-3', 'vol-7'],
    );
    assert.equal(count('NodeUnstageVolume'), 2);
    assert.ok(!existsSync(join(staging('vol-3'), '..')));
    assert.deepEqual(await h.newPlugin().constructDeviceSpecs(), [], 'nothing staged is left');
  },
);

mountTest(
  'a staged volume whose pods are gone is reconstructed after a restart; a user whose json vanished does not hold an unstage',
  async (t) => {
    const { h, count } = await harness(t);
    const mounter = createLinuxMounter({ systemd: 'off' });
    const a = claimVolume(h, 1);
    const b = claimVolume(h, 2, 2);
    const c = claimVolume(h, 3, 2);
    await setUpVolume(h.plugin, a);
    await setUpVolume(h.plugin, b);
    await setUpVolume(h.plugin, c, { staged: true });
    const podVolumeDir = (v: typeof a) =>
      join(h.root, 'pods', v.uid, 'volumes', 'kubernetes.io~csi', v.inner);
    const removeByHand = async (v: typeof a) => {
      await mounter.unmount(join(podVolumeDir(v), 'mount'));
      await rm(podVolumeDir(v), { recursive: true });
    };

    // A podvol killed between unpublish and unstage of pod 1: only the staging json names vol-1.
    await removeByHand(a);
    const restarted = h.newPlugin();
    const found = (await restarted.constructDeviceSpecs()).map((d) => d.deviceName).sort();
    assert.deepEqual(found, [
      `kubernetes.io/csi/${h.driverName}^vol-1`,
      `kubernetes.io/csi/${h.driverName}^vol-2`,
    ]);
    await unmountDeviceOf(restarted, a);
    assert.equal(count('NodeUnstageVolume'), 1);

    // Pod 2's directory goes behind podvol's back; the index still lists it, the disk decides.
    await removeByHand(b);
    await restarted.newUnmounter(c.inner, c.uid).tearDown();
    await unmountDeviceOf(restarted, c);
    assert.equal(count('NodeUnstageVolume'), 2, 'vol-2 unstaged once its last real user is gone');
  },
);
