// CSI migration end to end: the test CSI driver registered under the name of
// GCE's PD driver (pd.csi.storage.gke.io) serves a PersistentVolume and an
// inline pod volume written as in-tree gcePersistentDisk, which podvol
// translates as csi-translation-lib does; the CSINode says which in-tree
// plugins this node serves through CSI.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { sha256Hex } from '../../src/plugins/csi/vol-data.ts';
import { readCalls } from '../csi/driver.ts';
import { volumeOf, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { uidOf } from '../helpers/pods.ts';
import { csiCluster, mounted } from './csi/harness.ts';

const DRIVER = 'pd.csi.storage.gke.io';

/** The test driver under GCE PD's name, and podvol against the test API server. */
async function gceCluster(t: TestContext) {
  const c = await csiCluster(t, { driver: { name: DRIVER, nodeID: 'gce-node-1', topology: {} } });
  return { ...c, p: await c.start() };
}

mountTest(
  'a gcePersistentDisk PV and an inline gcePersistentDisk are staged and published by pd.csi.storage.gke.io',
  async (t) => {
    const c = await gceCluster(t);
    const claim = c.api.store.create('persistentvolumeclaims', {
      metadata: { name: 'old', namespace: 'default' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        volumeName: 'pv-old',
        resources: { requests: { storage: '1Gi' } },
      },
      status: { phase: 'Bound' },
    });
    c.api.store.create('persistentvolumes', {
      metadata: { name: 'pv-old' },
      spec: {
        // The in-tree plugin took RWX without complaint; the translation reads it as RWO.
        accessModes: ['ReadWriteMany'],
        capacity: { storage: '1Gi' },
        claimRef: { namespace: 'default', name: 'old', uid: claim.metadata?.uid },
        gcePersistentDisk: { pdName: 'disk-1', fsType: 'ext4' },
        mountOptions: ['noatime'],
        volumeMode: 'Filesystem',
      },
      status: { phase: 'Bound' },
    });
    const pod = c.api.store.create('pods', {
      metadata: { name: 'legacy', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [
          {
            name: 'app',
            image: 'busybox',
            volumeMounts: [
              { name: 'data', mountPath: '/data' },
              { name: 'scratch', mountPath: '/scratch' },
            ],
          },
        ],
        volumes: [
          { name: 'data', persistentVolumeClaim: { claimName: 'old' } },
          { name: 'scratch', gcePersistentDisk: { pdName: 'disk-2', partition: 1 } },
        ],
      },
      status: { phase: 'Running' },
    });
    const uid = uidOf(pod);
    await mounted(c.p, 'legacy', 'data');
    await mounted(c.p, 'legacy', 'scratch');

    // csi-translation-lib's handle: no zone label on the PV, so project and zone are UNSPECIFIED.
    const handle = 'projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-1';
    const inlineHandle = 'projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-2';
    const calls = readCalls(c.stateDir);
    const stage = calls.find((x) => x.method === 'NodeStageVolume' && x.request.volume_id === handle);
    assert.ok(stage, 'the translated PV is staged');
    assert.equal(
      stage.request.staging_target_path,
      join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle), 'globalmount'),
    );
    assert.deepEqual(stage.request.volume_context, { partition: '' });
    assert.deepEqual(stage.request.volume_capability, {
      mount: { fs_type: 'ext4', mount_flags: ['noatime'], volume_mount_group: '' },
      access_mode: { mode: 'SINGLE_NODE_WRITER' },
      access_type: 'mount',
    });
    const publish = calls.find((x) => x.method === 'NodePublishVolume' && x.request.volume_id === handle);
    assert.equal(
      publish?.request.target_path,
      join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', 'pv-old', 'mount'),
    );
    // The inline disk: a PV named <driver>-<pdName> as the lib names it, its directory too.
    const inlineDir = join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', `${DRIVER}-disk-2`);
    const inlinePublish = calls.find(
      (x) => x.method === 'NodePublishVolume' && x.request.volume_id === inlineHandle,
    );
    assert.equal(inlinePublish?.request.target_path, join(inlineDir, 'mount'));
    assert.deepEqual(inlinePublish?.request.volume_context, { partition: '1' });
    assert.equal(
      JSON.parse(await readFile(join(inlineDir, 'vol_data.json'), 'utf8')).volumeLifecycleMode,
      'Persistent',
    );

    // kubelet's nodeinfomanager: every in-tree plugin the node serves through CSI.
    const csiNode = c.api.store.mustGet('csinodes.storage.k8s.io', undefined, 'testnode') as {
      metadata: { annotations?: Record<string, string> };
    };
    assert.equal(
      csiNode.metadata.annotations?.['storage.alpha.kubernetes.io/migrated-plugins'],
      'kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/rbd,kubernetes.io/vsphere-volume',
    );

    // A restart adopts both: reconstructed from their vol_data.json as CSI volumes of the driver, they
    // match the translated in-tree specs, so nothing is unpublished or unstaged and both report mounted.
    const mountPoints = async () => (await mountsBelow(c.root)).map((m) => m.mountPoint).sort();
    const mountsBefore = await mountPoints();
    assert.equal(await c.p.stop(), 0);
    const before = readCalls(c.stateDir).length;
    const p2 = await c.start();
    await mounted(p2, 'legacy', 'data');
    await mounted(p2, 'legacy', 'scratch');
    const after = readCalls(c.stateDir).slice(before);
    assert.deepEqual(
      after.filter((x) => x.method === 'NodeUnpublishVolume' || x.method === 'NodeUnstageVolume'),
      [],
      'a restart tore nothing down',
    );
    assert.deepEqual(await mountPoints(), mountsBefore, 'the same mounts after the restart');

    // Torn down through the driver as any CSI volume.
    c.api.store.delete('pods', 'default', 'legacy', { gracePeriodSeconds: 0 });
    await waitGone('the pod directory', join(c.root, 'pods', uid));
    await waitFor(
      'both unstaged',
      () =>
        readCalls(c.stateDir).filter((x) => x.method === 'NodeUnstageVolume').length === 2 ? true : undefined,
      30_000,
    );
    assert.deepEqual(await mountsBelow(c.root), []);
  },
);

mountTest('an in-tree type podvol does not translate still fails as an unknown volume source', async (t) => {
  const c = await gceCluster(t);
  c.api.store.create('pods', {
    metadata: { name: 'fc', namespace: 'default' },
    spec: {
      nodeName: 'testnode',
      containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'disk', mountPath: '/d' }] }],
      volumes: [{ name: 'disk', fc: { targetWWNs: ['500a0982991b8dc5'], lun: 2 } }],
    },
    status: { phase: 'Running' },
  });
  const v = await waitFor('fc volume failed', async () => {
    const s = (await volumeOf(c.p, 'fc', 'disk')) as { state?: string; reason?: string } | undefined;
    return s?.state === 'failed' ? s : undefined;
  });
  assert.equal(v.reason, 'UnknownVolumeSource');
});
