// CSI volumes end to end (harness.ts): attachRequired drivers: volumesInUse, the wait for
// volumesAttached and the VolumeAttachment, its Events and its timeout.
import assert from 'node:assert/strict';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { updateDriverConfig } from '../../csi/driver.ts';
import { volumeOf, waitFor } from '../../helpers/daemon.ts';
import {
  attach,
  claimPod,
  createClaim,
  csiCluster,
  csiTest,
  DRIVER,
  deletePod,
  failedMounts,
  mounted,
  uniqueNameOf,
  volumesInUse,
} from './harness.ts';

csiTest(
  'attachRequired: the volume is reported in use, then waits for volumesAttached and the VolumeAttachment',
  async (t) => {
    // No CSIDriver object: attach is required, as in kubelet.
    const c = await csiCluster(t, { csiDriver: null });
    const { handle } = createClaim(c, 'att');
    claimPod(c, 'web', 'att');
    const p = await c.start();
    const unique = uniqueNameOf(handle);
    const nodeStatus = () => c.store.mustGet('nodes', undefined, 'testnode');
    await waitFor('reported in use', () => volumesInUse(c).includes(unique));
    const pending = await waitFor('attach pending', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' ? v : undefined;
    });
    assert.match(pending.message, /VolumesInUse|VolumesAttached/);
    assert.equal(
      c.calls().filter((x) => x.method === 'NodeStageVolume').length,
      0,
      'nothing staged before attach',
    );
    // Retried, and no FailedMount Event for any of the retries while it waits (kubelet posts none).
    await waitFor('retried while pending', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' && v.attempts >= 3;
    });
    assert.deepEqual(failedMounts(c, 'web'), []);

    // The attach/detach controller and external-attacher do their part.
    const vaName = `csi-${sha256Hex(`${handle}${DRIVER}testnode`)}`;
    const va = c.store.create('volumeattachments.storage.k8s.io', {
      metadata: { name: vaName },
      spec: { attacher: DRIVER, nodeName: 'testnode', source: { persistentVolumeName: 'pv-att' } },
    });
    c.store.update(
      'volumeattachments.storage.k8s.io',
      {
        ...va,
        status: { attached: false, attachError: { message: 'disk busy', time: new Date() } },
      },
      { subresource: 'status' },
    );
    const n = nodeStatus();
    c.store.update(
      'nodes',
      { ...n, status: { ...n.status, volumesAttached: [{ name: unique, devicePath: '' }] } },
      { subresource: 'status' },
    );
    const failed = await waitFor(
      'attach error',
      async () => {
        const v = await volumeOf(p, 'web');
        return v?.reason === 'AttachFailed' ? v : undefined;
      },
      30_000,
    );
    assert.match(failed.message, /disk busy/);
    // An attach error ends kubelet's WaitForAttach at once: its Event, with the attacher's message as it is.
    await waitFor('the WaitForAttach event', () =>
      failedMounts(c, 'web').includes('MountVolume.WaitForAttach failed for volume "pv-att" : disk busy'),
    );
    const cur = c.store.mustGet('volumeattachments.storage.k8s.io', undefined, vaName);
    c.store.update(
      'volumeattachments.storage.k8s.io',
      { ...cur, status: { attached: true, attachmentMetadata: { devicePath: '/dev/fake0' } } },
      { subresource: 'status' },
    );
    await mounted(p, 'web');
    const stage = c.calls().find((x) => x.method === 'NodeStageVolume' && x.code === 0);
    assert.deepEqual(stage?.request.publish_context, { devicePath: '/dev/fake0' });
    const publish = c.calls().find((x) => x.method === 'NodePublishVolume' && x.code === 0);
    assert.deepEqual(publish?.request.publish_context, { devicePath: '/dev/fake0' });

    // Torn down: the volume leaves volumesInUse only after it is unmounted.
    deletePod(c, 'web');
    await waitFor('no longer in use', () => !volumesInUse(c).includes(unique), 30_000);
    assert.ok(c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.code === 0));
  },
);

csiTest(
  'attachRequired: the attach wait posts no Event until its timeout, then one MountVolume.WaitForAttach Event',
  async (t) => {
    const c = await csiCluster(t, { csiDriver: null });
    const { pvName, handle } = createClaim(c, 'slow');
    claimPod(c, 'web', 'slow');
    const p = await c.start(['--wait-for-attach-timeout', '1s']);
    const unique = uniqueNameOf(handle);
    // Not yet in volumesAttached (kubelet's VerifyControllerAttachedVolume): retried past the
    // timeout and still no Event, as the attach wait has not begun.
    await waitFor('retried before volumesAttached', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' && v.attempts >= 4;
    });
    assert.deepEqual(failedMounts(c, 'web'), []);
    // Listed as attached, but its VolumeAttachment is never attached: the wait times out.
    const n = c.store.mustGet('nodes', undefined, 'testnode');
    c.store.update(
      'nodes',
      { ...n, status: { ...n.status, volumesAttached: [{ name: unique, devicePath: '' }] } },
      { subresource: 'status' },
    );
    const timedOut = `MountVolume.WaitForAttach failed for volume "${pvName}" : timed out waiting for external-attacher of ${DRIVER} CSI driver to attach volume ${handle}`;
    await waitFor('the WaitForAttach timeout event', () => failedMounts(c, 'web').includes(timedOut), 60_000);
    // Every Event the pod got is that one: none for the retries of the wait.
    assert.deepEqual([...new Set(failedMounts(c, 'web'))], [timedOut]);
    assert.equal(c.calls().filter((x) => x.method === 'NodeStageVolume').length, 0, 'nothing staged');
  },
);

csiTest(
  'attachRequired: a volume stays in volumesInUse until a NodeUnstageVolume succeeds (a failing unstage, an uncertain stage)',
  async (t) => {
    // No CSIDriver object: attach is required, as in kubelet.
    const c = await csiCluster(t, { csiDriver: null });
    const keep = createClaim(c, 'keep', { handle: 'keep' });
    const unc = createClaim(c, 'unc', { handle: 'unc' });
    attach(c, [keep.handle, unc.handle]);
    claimPod(c, 'web', 'keep');
    const p = await c.start();
    await mounted(p, 'web');
    const inUse = () => volumesInUse(c);
    const unstages = (handle: string) =>
      c.calls().filter((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === handle);
    // Every look: a volume not yet unstaged must be in volumesInUse. The node is read
    // before the call log, so a volume that left the list after its unstage is never
    // taken for one that left before (the driver logs a call before it answers).
    const early: string[] = [];
    const check = () => {
      const listed = inUse();
      for (const handle of [keep.handle, unc.handle]) {
        const unique = uniqueNameOf(handle);
        if (!listed.includes(unique) && !unstages(handle).some((x) => x.code === 0)) early.push(handle);
      }
    };

    // The driver refuses every NodeUnstageVolume, and times out the second volume's NodeStageVolume.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {
        NodeUnstageVolume: { code: 13, message: 'device busy' },
        NodeStageVolume: { code: 4, message: 'slow' },
      };
    });
    claimPod(c, 'unc', 'unc');
    await waitFor(
      'the uncertain stage',
      async () => (await volumeOf(p, 'unc'))?.reason === 'CSICallUncertain',
    );
    deletePod(c, 'web');
    deletePod(c, 'unc');
    // Both pods' volumes torn down, and the unstage of each refused a few times, by the
    // TearDown and then by the housekeeping sweep that retries it.
    await waitFor(
      'both pods gone and three refused unstages each',
      async () => {
        check();
        const pods = (await p.status()).pods.map((x) => x.name);
        return (
          !pods.includes('web') &&
          !pods.includes('unc') &&
          unstages(keep.handle).filter((x) => x.code === 13).length >= 3 &&
          unstages(unc.handle).filter((x) => x.code === 13).length >= 3
        );
      },
      60_000,
    );
    assert.deepEqual(early, [], 'left volumesInUse while still staged');

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    await waitFor(
      'both unstaged and out of volumesInUse',
      () => {
        check();
        return inUse().length === 0;
      },
      30_000,
    );
    assert.deepEqual(early, [], 'left volumesInUse while still staged');
    assert.ok(unstages(keep.handle).some((x) => x.code === 0));
    assert.ok(unstages(unc.handle).some((x) => x.code === 0));
  },
);
