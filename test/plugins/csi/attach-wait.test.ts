// The CSI attach wait (kubelet's WaitForAttach) on the plugin's injected clock:
// a VolumeAttachment not attached is AttachPending until the wait's timeout
// has passed on that clock (no real time, no timer), then one
// AttachTimedOut failure of the WaitForAttach step, then a new wait.
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { VolumeError } from '../../../src/volumehost/volume.ts';
import { addNode } from '../../apiserver/node.ts';
import { startTestApiServer } from '../../apiserver/server.ts';
import { typedStore } from '../../apiserver/typed-store.ts';
import { readCalls } from '../../csi/driver.ts';
import { claimVolume, startHarness } from '../../csi/harness.ts';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

mountTest('the attach wait times out on the injected clock, then waits again', async (t) => {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t, 'pv-csi-attachwait-');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(await api.kubeconfigPath(base));
  const clock = fakeClock();
  const driverName = 'wait.csi.podvol.io';
  const unique = `kubernetes.io/csi/${driverName}^vol-1`;
  const h = await startHarness(base, {
    driverName,
    csiDriver: { attachRequired: true },
    cluster: { kubeConfig },
    clock,
    waitForAttachTimeoutMs: 60_000,
    volumesReportedInUse: () => new Set([unique]),
  });
  t.after(() => h.stop());
  addNode(api.store, 'harnessnode');
  const store = typedStore(api.store);
  const node = store.mustGet('nodes', undefined, 'harnessnode');
  store.update(
    'nodes',
    { ...node, status: { ...node.status, volumesAttached: [{ name: unique, devicePath: '' }] } },
    { subresource: 'status' },
  );
  const v = claimVolume(h, 1);
  const attempt = () =>
    h.plugin.mountDevice(v.spec, v.pod).then(
      () => assert.fail('no VolumeAttachment: the wait cannot end attached'),
      (e: unknown) => {
        assert.ok(e instanceof VolumeError);
        return e;
      },
    );

  assert.equal((await attempt()).reason, 'AttachPending', 'the first look starts the wait');
  await clock.advance(59_999);
  const pending = await attempt();
  assert.equal(pending.reason, 'AttachPending', 'one millisecond before the timeout');
  assert.equal(pending.step, undefined, 'no Event step while waiting');
  await clock.advance(1);
  const timedOut = await attempt();
  assert.equal(timedOut.reason, 'AttachTimedOut');
  assert.equal(timedOut.step, 'WaitForAttach');
  assert.equal(
    timedOut.eventMessage,
    `timed out waiting for external-attacher of ${driverName} CSI driver to attach volume vol-1`,
  );
  assert.equal((await attempt()).reason, 'AttachPending', 'a new wait begins');
  assert.equal(readCalls(h.stateDir).filter((c) => c.method === 'NodeStageVolume').length, 0);
});
