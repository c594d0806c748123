// CSI volumes end to end (harness.ts): a bound PVC staged and published with kubelet's
// paths and files, one stage shared by two pods, and a driver that does not stage.
import assert from 'node:assert/strict';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { backingDir } from '../../csi/driver.ts';
import { waitGone } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { at } from '../../helpers/must.ts';
import { uidOf } from '../../helpers/pods.ts';
import {
  claimPod,
  createClaim,
  csiCluster,
  csiTest,
  DRIVER,
  deletePod,
  methods,
  mounted,
} from './harness.ts';

csiTest(
  'a bound PVC is staged then published, with kubelet paths, vol_data.json bytes and node info',
  async (t) => {
    const c = await csiCluster(t, { csiDriver: { podInfoOnMount: true } });
    const { pvName, handle } = createClaim(c, 'data1');
    const pod = claimPod(c, 'web', 'data1');
    const uid = uidOf(pod);
    const p = await c.start();
    const v = await mounted(p, 'web');
    const dir = join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName);
    assert.equal(v.path, join(dir, 'mount'));
    const stagingDir = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle));
    const attachmentID = `csi-${sha256Hex(`${handle}${DRIVER}testnode`)}`;
    assert.equal(
      await readFile(join(dir, 'vol_data.json'), 'utf8'),
      `{"attachmentID":"${attachmentID}","driverName":"${DRIVER}","nodeName":"testnode","specVolID":"${pvName}","volumeHandle":"${handle}","volumeLifecycleMode":"Persistent"}\n`,
    );
    assert.equal(
      await readFile(join(stagingDir, 'vol_data.json'), 'utf8'),
      `{"driverName":"${DRIVER}","volumeHandle":"${handle}"}\n`,
    );
    assert.equal((await stat(stagingDir)).mode & 0o777, 0o750);
    assert.equal((await stat(dir)).mode & 0o777, 0o750);
    // kubelet's os.Create under its umask 022.
    assert.equal((await stat(join(dir, 'vol_data.json'))).mode & 0o777, 0o644);
    assert.equal((await stat(join(stagingDir, 'vol_data.json'))).mode & 0o777, 0o644);

    // The data really is the driver's backing directory, through both mounts.
    await writeFile(join(dir, 'mount', 'hello'), 'world');
    assert.equal(await readFile(join(backingDir(c.stateDir, handle), 'hello'), 'utf8'), 'world');
    const mps = (await mountsBelow(c.root)).map((m) => m.mountPoint);
    assert.ok(mps.includes(join(stagingDir, 'globalmount')));
    assert.ok(mps.includes(join(dir, 'mount')));

    const stage = c.calls().find((x) => x.method === 'NodeStageVolume');
    assert.deepEqual(stage?.request, {
      volume_id: handle,
      publish_context: {},
      staging_target_path: join(stagingDir, 'globalmount'),
      volume_capability: {
        mount: { fs_type: '', mount_flags: ['noatime'], volume_mount_group: '' },
        access_mode: { mode: 'SINGLE_NODE_WRITER' },
        access_type: 'mount',
      },
      secrets: {},
      volume_context: { 'attr.example/size': 'small' },
    });
    const publish = c.calls().find((x) => x.method === 'NodePublishVolume');
    assert.equal(publish?.request.target_path, join(dir, 'mount'));
    assert.equal(publish?.request.staging_target_path, join(stagingDir, 'globalmount'));
    assert.equal(publish?.request.readonly, false);
    assert.deepEqual(publish?.request.volume_context, {
      'attr.example/size': 'small',
      'csi.storage.k8s.io/pod.name': 'web',
      'csi.storage.k8s.io/pod.namespace': 'default',
      'csi.storage.k8s.io/pod.uid': uid,
      'csi.storage.k8s.io/serviceAccount.name': 'default',
      'csi.storage.k8s.io/ephemeral': 'false',
    });

    // Registration published the node info like kubelet's nodeinfomanager.
    const csiNode = c.store.mustGet('csinodes.storage.k8s.io', undefined, 'testnode');
    assert.deepEqual(csiNode.spec.drivers, [
      {
        name: DRIVER,
        nodeID: 'csi-node-1',
        topologyKeys: ['topology.test.csi/zone'],
        allocatable: { count: 16 },
      },
    ]);
    assert.equal(at(csiNode.metadata?.ownerReferences ?? [], 0).kind, 'Node');
    const node = c.store.mustGet('nodes', undefined, 'testnode');
    assert.equal(
      node.metadata?.annotations?.['csi.volume.kubernetes.io/nodeid'],
      `{"${DRIVER}":"csi-node-1"}`,
    );
    assert.equal(node.metadata?.labels?.['topology.test.csi/zone'], 'zone-a');
    assert.deepEqual(await c.registrar.status, { plugin_registered: true, error: '' });
  },
);

csiTest(
  'two pods on one PVC: one stage, two publishes; unpublish on deletion, unstage after the last pod',
  async (t) => {
    const c = await csiCluster(t);
    const { pvName, handle } = createClaim(c, 'shared');
    const a = claimPod(c, 'a', 'shared');
    const b = claimPod(c, 'b', 'shared');
    const p = await c.start();
    await mounted(p, 'a');
    await mounted(p, 'b');
    const count = (m: string) => c.calls().filter((x) => x.method === m && x.code === 0).length;
    assert.equal(count('NodeStageVolume'), 1);
    assert.equal(count('NodePublishVolume'), 2);
    const stagingDir = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle));

    deletePod(c, 'a');
    await waitGone('pod a torn down', join(c.root, 'pods', uidOf(a)));
    assert.equal(count('NodeUnpublishVolume'), 1);
    assert.equal(count('NodeUnstageVolume'), 0, 'b still uses the staged volume');
    assert.ok((await mountsBelow(c.root)).some((m) => m.mountPoint === join(stagingDir, 'globalmount')));

    deletePod(c, 'b');
    await waitGone('pod b torn down', join(c.root, 'pods', uidOf(b)));
    await waitGone('staging directory removed', stagingDir);
    assert.equal(count('NodeUnpublishVolume'), 2);
    assert.equal(count('NodeUnstageVolume'), 1);
    const order = methods(c).map((x) => x.method);
    assert.equal(order.at(-1), 'NodeUnstageVolume');
    assert.deepEqual(await mountsBelow(c.root), []);
    void pvName;
  },
);

csiTest(
  'a driver without STAGE_UNSTAGE_VOLUME: no NodeStage, yet globalmount (0750) and its vol_data.json as kubelet, gone after the pod',
  async (t) => {
    const c = await csiCluster(t, { driver: { capabilities: [] } });
    const { handle } = createClaim(c, 'nostage');
    claimPod(c, 'pns', 'nostage');
    const p = await c.start();
    await mounted(p, 'pns');
    const stagingDir = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle));
    // kubelet's MountDevice makes both before it asks whether the driver stages.
    assert.equal((await stat(join(stagingDir, 'globalmount'))).mode & 0o777, 0o750);
    assert.equal(
      await readFile(join(stagingDir, 'vol_data.json'), 'utf8'),
      `{"driverName":"${DRIVER}","volumeHandle":"${handle}"}\n`,
    );
    assert.deepEqual(
      methods(c).map((x) => x.method),
      ['NodePublishVolume'],
    );
    assert.equal(at(methods(c), 0).request.staging_target_path, '');
    deletePod(c, 'pns');
    await waitGone('the staging directory', stagingDir);
    assert.deepEqual(
      methods(c).map((x) => x.method),
      ['NodePublishVolume', 'NodeUnpublishVolume'],
    );
  },
);
