// A CSI driver whose NodePublishVolume never answers: the call ends at the
// plugin's deadline (kubelet's 2 minutes; shorter here) with an uncertain
// outcome and a precise reason, other volumes of the same driver keep working
// meanwhile, the uncertain volume is still torn down, and shutdown cancels a
// call that would otherwise hold it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CSIPlugin } from '../../../src/plugins/csi/csi-plugin.ts';
import { VolumeError } from '../../../src/volumehost/volume.ts';
import { readCalls } from '../../csi/driver.ts';
import { claimVolume, setUpVolume, startHarness, unmountDeviceOf } from '../../csi/harness.ts';
import { waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

const never = 3_600_000;

/** Resolves once the volume's SetUp waits in NodePublishVolume (/status's phase). */
async function publishing(plugin: CSIPlugin, v: { uid: string; inner: string }): Promise<void> {
  await waitFor('NodePublishVolume in flight', () => plugin.phaseOf(v.uid, v.inner) === 'publishing', 60_000);
}

mountTest(
  'a hanging NodePublishVolume: deadline, precise reason, others unaffected, torn down later, cancelled at shutdown',
  async (t) => {
    const h = await startHarness(await tempDir(t, 'pv-csi-hang-'), {
      // Generous for the calls that do answer on a loaded machine; the hanging one waits it out.
      timeoutMs: 10_000,
      driver: { delays: { 'NodePublishVolume/vol-hang': never } },
    });
    t.after(() => h.stop());
    const hung = claimVolume(h, 1, 1, { handle: 'vol-hang' });
    const other = claimVolume(h, 2);

    const hanging = setUpVolume(h.plugin, hung);
    await publishing(h.plugin, hung);
    // While it hangs, another pod's volume of the same driver is set up and torn down.
    await setUpVolume(h.plugin, other);
    assert.equal(h.plugin.phaseOf(hung.uid, hung.inner), 'publishing');
    await h.plugin.newUnmounter(other.inner, other.uid).tearDown();
    await unmountDeviceOf(h.plugin, other);

    const err = await hanging.then(
      () => assert.fail('a call that never answers cannot succeed'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof VolumeError);
    assert.equal(err.reason, 'CSICallUncertain');
    assert.match(err.message, /^NodePublishVolume failed: rpc error: code = DeadlineExceeded desc = /);
    // Uncertain: the pod's json stays, so the teardown still unpublishes, and the device is unstaged after it.
    const dir = join(h.root, 'pods', hung.uid, 'volumes', 'kubernetes.io~csi', hung.inner);
    assert.ok(existsSync(join(dir, 'vol_data.json')));
    await h.plugin.newUnmounter(hung.inner, hung.uid).tearDown();
    assert.ok(!existsSync(dir));
    await unmountDeviceOf(h.plugin, hung);
    const unstaged = readCalls(h.stateDir).filter((c) => c.method === 'NodeUnstageVolume');
    assert.deepEqual(
      unstaged.map((c) => c.request.volume_id),
      ['vol-2', 'vol-hang'],
    );

    // Shutdown: with kubelet's 2-minute deadline, only the cancellation ends this call within the test.
    const plugin = h.newPlugin({ timeoutMs: never });
    const stuck = setUpVolume(plugin, hung);
    await publishing(plugin, hung);
    assert.equal(plugin.cancelCalls(), 1);
    const cancelled = await stuck.then(
      () => assert.fail('a cancelled call cannot succeed'),
      (e: unknown) => e as VolumeError,
    );
    assert.equal(cancelled.reason, 'CSICallUncertain');
    assert.match(cancelled.message, /code = Canceled/);
    // After shutdown began, a new call does not reach the driver at all.
    const before = readCalls(h.stateDir).length;
    await assert.rejects(plugin.newUnmounter(hung.inner, hung.uid).tearDown(), /code = Canceled/);
    assert.equal(readCalls(h.stateDir).length, before);
    await h.plugin.newUnmounter(hung.inner, hung.uid).tearDown();
  },
);
