// CSI volumes end to end (harness.ts): the CSIDriver's fsGroupPolicy, VOLUME_MOUNT_GROUP,
// and which readOnly makes NodePublishVolume read-only.
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { updateDriverConfig } from '../../csi/driver.ts';
import { uidOf } from '../../helpers/pods.ts';
import { claimPod, createClaim, csiCluster, csiTest, mounted, updateDriverSpec } from './harness.ts';

csiTest(
  'fsGroupPolicy: File always, None never, ReadWriteOnceWithFSType only with fsType and RWO; VOLUME_MOUNT_GROUP delegates',
  async (t) => {
    const c = await csiCluster(t, { csiDriver: { fsGroupPolicy: 'File' } });
    const file = createClaim(c, 'file');
    const podFile = claimPod(c, 'pfile', 'file', { securityContext: { fsGroup: 4321 } });
    const p = await c.start();
    await mounted(p, 'pfile');
    const dirOf = (pod: { metadata?: { uid?: string } }, pv: string) =>
      join(c.root, 'pods', uidOf(pod), 'volumes', 'kubernetes.io~csi', pv, 'mount');
    assert.equal((await stat(dirOf(podFile, file.pvName))).gid, 4321);
    assert.ok((await stat(dirOf(podFile, file.pvName))).mode & 0o2000, 'setgid');

    await updateDriverSpec(c, { fsGroupPolicy: 'None' });
    const none = createClaim(c, 'none');
    const podNone = claimPod(c, 'pnone', 'none', { securityContext: { fsGroup: 4321 } });
    await mounted(p, 'pnone');
    assert.notEqual((await stat(dirOf(podNone, none.pvName))).gid, 4321);

    await updateDriverSpec(c, { fsGroupPolicy: 'ReadWriteOnceWithFSType' });
    const noFs = createClaim(c, 'nofs');
    const podNoFs = claimPod(c, 'pnofs', 'nofs', { securityContext: { fsGroup: 4321 } });
    const withFs = createClaim(c, 'withfs', { fsType: 'ext4' });
    const podWithFs = claimPod(c, 'pwithfs', 'withfs', { securityContext: { fsGroup: 4321 } });
    await mounted(p, 'pnofs');
    await mounted(p, 'pwithfs');
    assert.notEqual((await stat(dirOf(podNoFs, noFs.pvName))).gid, 4321, 'no fsType: not applied');
    assert.equal((await stat(dirOf(podWithFs, withFs.pvName))).gid, 4321, 'fsType and RWO: applied');

    // VOLUME_MOUNT_GROUP: the fsGroup goes to the driver as volume_mount_group and podvol does not chown.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.capabilities = ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP', 'SINGLE_NODE_MULTI_WRITER'];
    });
    const mg = createClaim(c, 'mg', { fsType: 'ext4', accessModes: ['ReadWriteOncePod'] });
    const podMg = claimPod(c, 'pmg', 'mg', { securityContext: { fsGroup: 4321 } });
    await mounted(p, 'pmg');
    assert.notEqual((await stat(dirOf(podMg, mg.pvName))).gid, 4321);
    const pub = c.calls().find((x) => x.method === 'NodePublishVolume' && x.request.volume_id === mg.handle);
    assert.deepEqual(pub?.request.volume_capability, {
      mount: { fs_type: 'ext4', mount_flags: ['noatime'], volume_mount_group: '4321' },
      access_mode: { mode: 'SINGLE_NODE_SINGLE_WRITER' },
      access_type: 'mount',
    });
  },
);

csiTest(
  "readonly: only the pod's claim makes NodePublishVolume read-only, not the PV's csi.readOnly; fsGroup is applied to a PV marked readOnly",
  async (t) => {
    const c = await csiCluster(t, { csiDriver: { fsGroupPolicy: 'File' } });
    // The same PV flag on both; only the second pod's claim reference says readOnly.
    const rw = createClaim(c, 'rw', { readOnly: true });
    const ro = createClaim(c, 'ro', { readOnly: true });
    const podRw = claimPod(c, 'prw', 'rw', { securityContext: { fsGroup: 4321 } });
    const podRo = c.store.create('pods', {
      metadata: { name: 'pro', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        securityContext: { fsGroup: 4321 },
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'ro', readOnly: true } }],
      },
      status: { phase: 'Running' },
    });
    const p = await c.start();
    await mounted(p, 'prw');
    await mounted(p, 'pro');
    const publishOf = (handle: string) =>
      c.calls().find((x) => x.method === 'NodePublishVolume' && x.request.volume_id === handle);
    assert.equal(publishOf(rw.handle)?.request.readonly, false);
    assert.equal(publishOf(ro.handle)?.request.readonly, true);
    const mountOf = (pod: { metadata?: { uid?: string } }, pv: string) =>
      join(c.root, 'pods', uidOf(pod), 'volumes', 'kubernetes.io~csi', pv, 'mount');
    // The driver bound it read-write, so the group is podvol's to apply, as kubelet does.
    assert.equal((await stat(mountOf(podRw, rw.pvName))).gid, 4321);
    assert.notEqual((await stat(mountOf(podRo, ro.pvName))).gid, 4321, 'a read-only mount is not chowned');
  },
);
