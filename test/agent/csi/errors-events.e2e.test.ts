// CSI volumes end to end (harness.ts): driver errors (final and transient) and unusable
// claims, with kubelet's reasons and Events.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { updateDriverConfig } from '../../csi/driver.ts';
import { volumeOf, waitFor } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { claimPod, createClaim, csiCluster, csiTest, DRIVER, deletePod, mounted } from './harness.ts';

csiTest(
  'final versus transient errors: NodeStage retried after both; a final error is never unstaged, a transient one is',
  async (t) => {
    const c = await csiCluster(t);
    const fin = createClaim(c, 'fin');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 9, message: 'not ready', times: 2 } };
    });
    claimPod(c, 'pfin', 'fin');
    const p = await c.start();
    const failed = await waitFor('stage failure reported', async () => {
      const v = await volumeOf(p, 'pfin');
      return v?.reason === 'CSICallFailed' ? v : undefined;
    });
    assert.match(
      failed.message,
      /NodeStageVolume failed: rpc error: code = FailedPrecondition desc = not ready/,
    );
    const stagingFin = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(fin.handle));
    await mounted(p, 'pfin');
    assert.equal(
      c.calls().filter((x) => x.method === 'NodeStageVolume').length,
      3,
      'retried until it worked',
    );
    // kubelet's Events: the step that failed, the PersistentVolume's name, the driver's status as it came.
    const eventMessages = () => c.store.list('events', 'default').map((e) => e.message ?? '');
    await waitFor('the MountDevice event', () =>
      eventMessages().includes(
        `MountVolume.MountDevice failed for volume "${fin.pvName}" : rpc error: code = FailedPrecondition desc = not ready`,
      ),
    );
    const pub = createClaim(c, 'pub');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodePublishVolume: { code: 13, message: 'boom', times: 1 } };
    });
    claimPod(c, 'ppub', 'pub');
    await mounted(p, 'ppub');
    await waitFor('the SetUp event', () =>
      eventMessages().includes(
        `MountVolume.SetUp failed for volume "${pub.pvName}" : rpc error: code = Internal desc = boom`,
      ),
    );

    // A final error, then the pod goes away: nothing was staged, so no NodeUnstage.
    const fin2 = createClaim(c, 'fin2');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 3, message: 'bad argument' } };
    });
    claimPod(c, 'pfin2', 'fin2');
    await waitFor('final failure', async () => (await volumeOf(p, 'pfin2'))?.reason === 'CSICallFailed');
    deletePod(c, 'pfin2');
    await waitFor(
      'pod gone from status',
      async () => !(await p.status()).pods.some((x) => x.name === 'pfin2'),
    );
    await new Promise((r) => setTimeout(r, 3000));
    assert.ok(
      !c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === fin2.handle),
    );

    // A transient error (DeadlineExceeded), then the pod goes away: the volume may be staged, so NodeUnstage.
    const tr = createClaim(c, 'tr');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 4, message: 'slow' } };
    });
    claimPod(c, 'ptr', 'tr');
    await waitFor('transient failure', async () => (await volumeOf(p, 'ptr'))?.reason === 'CSICallUncertain');
    deletePod(c, 'ptr');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    await waitFor(
      'NodeUnstage after a transient stage error',
      () =>
        c
          .calls()
          .some((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === tr.handle && x.code === 0),
      30_000,
    );
    void stagingFin;
  },
);

csiTest('claims that cannot be used get kubelet reasons; a claim bound later mounts', async (t) => {
  const c = await csiCluster(t);
  const s = c.store;
  claimPod(c, 'missing', 'nope');
  s.create('persistentvolumeclaims', {
    metadata: { name: 'pending', namespace: 'default' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    status: { phase: 'Pending' },
  });
  claimPod(c, 'waiting', 'pending');
  const other = s.create('persistentvolumeclaims', {
    metadata: { name: 'stolen', namespace: 'default' },
    spec: { volumeName: 'pv-stolen', accessModes: ['ReadWriteOnce'] },
    status: { phase: 'Bound' },
  });
  s.create('persistentvolumes', {
    metadata: { name: 'pv-stolen' },
    spec: {
      claimRef: { namespace: 'default', name: 'stolen', uid: 'someone-else' },
      csi: { driver: DRIVER, volumeHandle: 'h' },
    },
  });
  claimPod(c, 'mismatch', 'stolen');
  const p = await c.start();
  const reasonOf = (pod: string, reason: string) =>
    waitFor(`${pod}: ${reason}`, async () => {
      const v = await volumeOf(p, pod);
      return v?.reason === reason ? v : undefined;
    });
  const missing = await reasonOf('missing', 'ClaimNotFound');
  assert.equal(
    missing.message,
    'error processing PVC default/nope: failed to fetch PVC from API server: persistentvolumeclaims "nope" not found',
  );
  const pending = await reasonOf('waiting', 'ClaimPending');
  assert.equal(
    pending.message,
    'error processing PVC default/pending: PVC default/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")',
  );
  const mism = await reasonOf('mismatch', 'PersistentVolumeClaimMismatch');
  assert.match(mism.message, new RegExp(`does not point to claim.UID \\(${other.metadata?.uid}\\)`));
  assert.deepEqual(await mountsBelow(join(c.root, 'pods')), [], 'nothing mounted for unusable claims');
  // kubelet's FailedMount Event on the pod whose claim is pending.
  const event = await waitFor('FailedMount event', () =>
    c.store
      .list('events', 'default')
      .find((e) => e.reason === 'FailedMount' && e.involvedObject.name === 'waiting'),
  );
  assert.equal(
    event.message,
    'Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: error processing PVC default/pending: PVC default/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")',
  );

  // The pending claim gets bound: the pod's volume mounts without the pod changing.
  const pvc = s.mustGet('persistentvolumeclaims', 'default', 'pending');
  s.create('persistentvolumes', {
    metadata: { name: 'pv-pending' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      claimRef: { namespace: 'default', name: 'pending', uid: pvc.metadata?.uid },
      csi: { driver: DRIVER, volumeHandle: 'h-pending' },
    },
  });
  const bound = s.update('persistentvolumeclaims', {
    ...pvc,
    spec: { ...pvc.spec, volumeName: 'pv-pending' },
  });
  s.update('persistentvolumeclaims', { ...bound, status: { phase: 'Bound' } }, { subresource: 'status' });
  await mounted(p, 'waiting');
});
