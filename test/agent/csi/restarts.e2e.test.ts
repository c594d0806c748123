// CSI volumes end to end (harness.ts): podvol killed mid-operation, a node taken over
// from kubelet (reconstruction from vol_data.json), a driver that re-registers, and
// a hanging driver call at shutdown.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { updateDriverConfig } from '../../csi/driver.ts';
import { startTestRegistrar } from '../../csi/registrar.ts';
import { startPodvol, volumeOf, waitFor, waitGone } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { uidOf } from '../../helpers/pods.ts';
import { claimPod, createClaim, csiCluster, csiTest, DRIVER, deletePod, mounted } from './harness.ts';

csiTest(
  'kill -9 between stage and publish, and between unpublish and unstage: the restart finishes the job',
  async (t) => {
    const c = await csiCluster(t);
    const { pvName, handle } = createClaim(c, 'k9');
    const pod = claimPod(c, 'web', 'k9');
    const uid = uidOf(pod);
    // NodePublish hangs: podvol is killed after NodeStage succeeded.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.delays = { NodePublishVolume: 60_000 };
    });
    let p = await c.start();
    await waitFor('NodeStage done', () =>
      c.calls().some((x) => x.method === 'NodeStageVolume' && x.code === 0),
    );
    // /status names the driver and the step the SetUp is at.
    const publishing = await waitFor('publishing phase', async () => {
      const v = await volumeOf(p, 'web');
      return v?.phase === 'publishing' ? v : undefined;
    });
    assert.equal(publishing.driver, DRIVER);
    assert.equal(publishing.state, 'pending');
    await p.stop('SIGKILL');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.delays = {};
    });
    p = await c.start();
    await mounted(p, 'web');
    const stagingDir = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle));
    assert.ok(
      (await mountsBelow(c.root)).some(
        (m) => m.mountPoint === join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName, 'mount'),
      ),
    );

    // Now NodeUnstage hangs: kill -9 after the unpublish; the pod is gone when podvol comes back.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.delays = { NodeUnstageVolume: 60_000 };
    });
    deletePod(c, 'web');
    await waitFor('NodeUnpublish done', () =>
      c.calls().some((x) => x.method === 'NodeUnpublishVolume' && x.code === 0),
    );
    await p.stop('SIGKILL');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.delays = {};
    });
    p = await c.start();
    await waitGone('staged volume of a gone pod unstaged', stagingDir, 30_000);
    assert.ok(c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.code === 0));
    assert.deepEqual(await mountsBelow(c.root), []);
  },
);

csiTest(
  'a node taken over from kubelet: volumes with only vol_data.json are adopted by their pods, or torn down when the pod is gone',
  async (t) => {
    const c = await csiCluster(t);
    const keep = createClaim(c, 'keep');
    const gone = createClaim(c, 'gone');
    const keepUID = uidOf(claimPod(c, 'stays', 'keep'));
    const goneUID = uidOf(claimPod(c, 'leaves', 'gone'));
    let p = await c.start();
    await mounted(p, 'stays');
    await mounted(p, 'leaves');
    assert.equal(await p.stop(), 0);
    // What kubelet leaves: its layout and vol_data.json files, none of podvol's records or marks.
    await rm(join(c.root, 'podvol'), { recursive: true });
    deletePod(c, 'leaves');
    const mountsBefore = (await mountsBelow(c.root)).map((m) => m.mountPoint).sort();
    const callsBefore = c.calls().length;
    p = await startPodvol({
      rootDir: c.root,
      extra: [
        '--kubeconfig',
        await c.api.kubeconfigPath(c.base),
        '--teardown-settle-period',
        '0s',
        '--adopt-root-dir',
      ],
    });
    t.after(() => p.stop());

    // The gone pod's volume: unpublished and unstaged from its vol_data.json alone.
    await waitGone('the gone pod directory', join(c.root, 'pods', goneUID), 60_000);
    const goneStaging = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(gone.handle));
    await waitGone('its staged volume', goneStaging, 60_000);
    const after = c.calls().slice(callsBefore);
    assert.deepEqual(
      after.filter((x) => x.method === 'NodeUnpublishVolume').map((x) => x.request),
      [
        {
          volume_id: gone.handle,
          target_path: join(c.root, 'pods', goneUID, 'volumes', 'kubernetes.io~csi', gone.pvName, 'mount'),
        },
      ],
    );
    assert.deepEqual(
      after.filter((x) => x.method === 'NodeUnstageVolume').map((x) => x.request.volume_id),
      [gone.handle],
    );

    // The pod still there: one volume under its own name, mounted where it was.
    const v = await mounted(p, 'stays');
    const target = join(c.root, 'pods', keepUID, 'volumes', 'kubernetes.io~csi', keep.pvName, 'mount');
    assert.equal(v.path, target);
    assert.deepEqual(
      (await p.status()).pods.find((x) => x.name === 'stays')?.volumes.map((x) => x.name),
      ['data'],
    );
    assert.deepEqual(
      (await mountsBelow(c.root)).map((m) => m.mountPoint).sort(),
      mountsBefore.filter((m) => !m.includes(goneUID) && !m.includes(sha256Hex(gone.handle))),
    );
  },
);

csiTest('a driver restart re-registers; volumes wait for a driver that is not registered', async (t) => {
  const c = await csiCluster(t);
  // The registrar goes away first: the driver is deregistered and its CSINode entry removed.
  await c.registrar.stop();
  await waitFor(
    'CSINode entry removed',
    () => {
      const n = c.store.get('csinodes.storage.k8s.io', undefined, 'testnode');
      return n !== undefined && (n.spec?.drivers ?? []).length === 0;
    },
    30_000,
  ).catch(() => undefined);
  createClaim(c, 'later');
  claimPod(c, 'web', 'later');
  const p = await c.start();
  const waiting = await waitFor('waiting for the driver', async () => {
    const v = await volumeOf(p, 'web');
    return v?.reason === 'DriverNotRegistered' ? v : undefined;
  });
  assert.match(
    waiting.message,
    /driver name test\.csi\.podvol\.io not found in the list of registered CSI drivers/,
  );
  const reg = await startTestRegistrar({
    registrationDir: join(c.root, 'plugins_registry'),
    driverName: DRIVER,
    endpoint: c.driver.socket,
  });
  t.after(() => reg.stop());
  assert.equal((await reg.status).plugin_registered, true);
  await mounted(p, 'web');
  const node = c.store.mustGet('nodes', undefined, 'testnode');
  assert.equal(node.metadata?.annotations?.['csi.volume.kubernetes.io/nodeid'], `{"${DRIVER}":"csi-node-1"}`);
  // Removing the registration socket deregisters: the annotation key goes.
  await reg.stop();
  await waitFor('annotation key removed', () => {
    const n = c.store.mustGet('nodes', undefined, 'testnode');
    return !n.metadata?.annotations?.['csi.volume.kubernetes.io/nodeid'];
  });
});

csiTest(
  'a hanging driver: the volume says it waits in NodePublishVolume, other pods mount, and SIGTERM is not held by the call',
  async (t) => {
    const c = await csiCluster(t, {
      driver: { delays: { 'NodePublishVolume/handle-stuck': 3_600_000 } },
    });
    createClaim(c, 'stuck');
    createClaim(c, 'fine');
    claimPod(c, 'hung', 'stuck');
    const p = await c.start();
    claimPod(c, 'web', 'fine');
    c.store.create('pods', {
      metadata: { name: 'plain', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }] }],
        volumes: [{ name: 'tmp', emptyDir: {} }],
      },
      status: { phase: 'Running' },
    });
    await mounted(p, 'web');
    await mounted(p, 'plain', 'tmp');
    const hung = await waitFor('the stuck volume in NodePublishVolume', async () => {
      const v = await volumeOf(p, 'hung');
      return v?.phase === 'publishing' ? v : undefined;
    });
    assert.equal(hung.state, 'pending');
    // kubelet's 2-minute deadline still runs; stopping podvol cancels the call instead of waiting for it.
    assert.equal(await p.stop(), 0);
    await waitFor('the cancellation logged', () =>
      p.logLines().some((l) => l.msg === 'cancelled CSI calls in flight for shutdown' && l.calls === 1),
    );
    // Stopping unmounted nothing.
    assert.ok((await mountsBelow(c.root)).some((m) => m.mountPoint.endsWith(join(`pv-fine`, 'mount'))));
  },
);
