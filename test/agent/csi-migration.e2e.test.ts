// CSI migration end to end: the test CSI driver registered under the name of
// GCE's PD driver (pd.csi.storage.gke.io) serves a PersistentVolume and an
// inline pod volume written as in-tree gcePersistentDisk, which podvol
// translates as csi-translation-lib does; the CSINode says which in-tree
// plugins this node serves through CSI.
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { sha256Hex } from '../../src/plugins/csi/vol-data.ts';
import { addNode } from '../apiserver/node.ts';
import { startTestApiServer } from '../apiserver/server.ts';
import { readCalls, startTestDriver, writeDriverConfig } from '../csi/driver.ts';
import { startTestRegistrar } from '../csi/registrar.ts';
import { startPodvol, volumeOf, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { uidOf } from '../helpers/pods.ts';

const DRIVER = 'pd.csi.storage.gke.io';

async function gceCluster(t: TestContext) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t, 'pv-csi-migration-');
  const kubeconfig = await api.kubeconfigPath(base);
  addNode(api.store, 'testnode');
  api.store.create('csidrivers', { metadata: { name: DRIVER }, spec: { attachRequired: false } });
  const root = join(base, 'root');
  const stateDir = join(base, 'driver');
  writeDriverConfig(stateDir, { name: DRIVER, nodeID: 'gce-node-1', capabilities: ['STAGE_UNSTAGE_VOLUME'] });
  await mkdir(join(root, 'plugins', DRIVER), { recursive: true });
  await mkdir(join(root, 'plugins_registry'), { recursive: true });
  const driver = await startTestDriver(join(root, 'plugins', DRIVER, 'csi.sock'), stateDir);
  t.after(() => driver.stop());
  const registrar = await startTestRegistrar({
    registrationDir: join(root, 'plugins_registry'),
    driverName: DRIVER,
    endpoint: driver.socket,
  });
  t.after(() => registrar.stop());
  const p = await startPodvol({
    rootDir: root,
    extra: ['--kubeconfig', kubeconfig, '--teardown-settle-period', '0s'],
  });
  t.after(() => p.stop());
  return { api, root, stateDir, p };
}

async function mounted(p: Awaited<ReturnType<typeof startPodvol>>, pod: string, volume: string) {
  let last: unknown;
  return waitFor(
    `${pod}/${volume} mounted`,
    async () => {
      last = await volumeOf(p, pod, volume);
      return (last as { state?: string } | undefined)?.state === 'mounted' ? last : undefined;
    },
    30_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last status: ${JSON.stringify(last)}`);
  });
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
      'kubernetes.io/aws-ebs,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume',
    );

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
