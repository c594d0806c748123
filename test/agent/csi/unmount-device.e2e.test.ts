// CSI volumes end to end (harness.ts): staging as an operation of its own, as
// kubelet's UnmountDevice. A driver refusing NodeUnstageVolume no longer fails
// the pod's TearDown: the pod's volume is unpublished and its directory goes,
// while the device stays staged, in the actual state and in
// node.status.volumesInUse, and NodeUnstageVolume is retried (with backoff,
// across a restart) until it succeeds; only then does it leave the list.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { updateDriverConfig } from '../../csi/driver.ts';
import { waitFor } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { uidOf } from '../../helpers/pods.ts';
import {
  attach,
  claimPod,
  createClaim,
  csiCluster,
  csiTest,
  deletePod,
  globalmountOf,
  mounted,
  uniqueNameOf,
  volumesInUse,
} from './harness.ts';

csiTest(
  'a failing NodeUnstageVolume: the pod is torn down, the device stays staged and in volumesInUse, retried until it succeeds',
  async (t) => {
    // No CSIDriver object: attach is required, as for every cloud block driver.
    const c = await csiCluster(t, { csiDriver: null });
    const { handle } = createClaim(c, 'dev');
    attach(c, [handle]);
    const uid = uidOf(claimPod(c, 'web', 'dev'));
    let p = await c.start();
    await mounted(p, 'web');
    const unique = uniqueNameOf(handle);
    const globalmount = globalmountOf(c, handle);
    const inUse = () => volumesInUse(c);
    const calls = (method: string, code?: number) =>
      c.calls().filter((x) => x.method === method && (code === undefined || x.code === code));
    // Every look: the volume is in volumesInUse unless a NodeUnstageVolume succeeded
    // (the node is read before the call log, so a later removal is never taken for an early one).
    let early = 0;
    const check = () => {
      const listed = inUse().includes(unique);
      if (!listed && calls('NodeUnstageVolume', 0).length === 0) early++;
    };
    const staged = async () => (await mountsBelow(c.root)).some((m) => m.mountPoint === globalmount);
    assert.ok(await staged(), 'staged at globalmount');

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeUnstageVolume: { code: 13, message: 'device busy' } };
    });
    deletePod(c, 'web');
    // The pod's TearDown (NodeUnpublishVolume) succeeds and its directory goes, while
    // UnmountDevice is refused again and again.
    await waitFor(
      'the pod gone and three refused unstages',
      async () => {
        check();
        const pods = (await p.status()).pods.map((x: { name: string }) => x.name);
        return (
          !pods.includes('web') &&
          !existsSync(join(c.root, 'pods', uid)) &&
          calls('NodeUnstageVolume', 13).length >= 3
        );
      },
      60_000,
    );
    assert.equal(calls('NodeUnpublishVolume', 0).length, 1, 'unpublished once');
    assert.ok(
      calls('NodeUnstageVolume', 13).every((x) => x.request.staging_target_path === globalmount),
      'the unstage is of globalmount',
    );
    check();
    assert.equal(early, 0, 'left volumesInUse while still staged');
    assert.ok(await staged(), 'still staged while the driver refuses');
    assert.ok(inUse().includes(unique));
    const unmountFailures = c.store
      .list('events', 'default')
      .filter((e) => e.reason === 'FailedUnMount' && e.involvedObject?.name === 'web');
    assert.deepEqual(unmountFailures, [], "the pod's TearDown did not fail");

    // A restart while the unstage still fails: the device is reconstructed from disk,
    // stays in volumesInUse, and its unstage goes on being retried.
    assert.equal(await p.stop(), 0);
    const before = calls('NodeUnstageVolume', 13).length;
    p = await c.start();
    await waitFor(
      'unstage retried after the restart',
      () => {
        check();
        return calls('NodeUnstageVolume', 13).length >= before + 2;
      },
      60_000,
    );
    assert.equal(early, 0, 'left volumesInUse while still staged (after the restart)');

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    await waitFor(
      'unstaged and out of volumesInUse',
      () => {
        check();
        return !inUse().includes(unique);
      },
      60_000,
    );
    assert.equal(early, 0, 'left volumesInUse while still staged');
    assert.equal(calls('NodeUnstageVolume', 0).length, 1, 'unstaged once');
    assert.ok(!existsSync(join(globalmount, '..')), 'globalmount and its json are gone');
    assert.deepEqual(await mountsBelow(c.root), []);
  },
);
