// `podvol drain` with CSI volumes (harness.ts): the pods' volumes are
// unpublished, and each staged device is unstaged by its own UnmountDevice
// operation; a driver refusing NodeUnstageVolume leaves the device named with
// the driver's error (exit 1), and the next drain finishes it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { updateDriverConfig } from '../../csi/driver.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { uidOf } from '../../helpers/pods.ts';
import { runCli } from '../ops/cli.ts';
import { claimPod, createClaim, csiCluster, csiTest, DRIVER, globalmountOf, mounted } from './harness.ts';

csiTest(
  'drain: unpublished, then unstaged by UnmountDevice; a refused unstage is named and finished next time',
  async (t) => {
    const c = await csiCluster(t);
    const { handle } = createClaim(c, 'dr');
    const uid = uidOf(claimPod(c, 'web', 'dr'));
    const p = await c.start();
    await mounted(p, 'web');
    assert.equal(await p.stop(), 0);
    const globalmount = globalmountOf(c, handle);
    assert.ok(
      (await mountsBelow(c.root)).some((m) => m.mountPoint === globalmount),
      'stopping unstaged nothing',
    );

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeUnstageVolume: { code: 13, message: 'device busy' } };
    });
    const refused = await runCli(['drain', '--root-dir', c.root, '--timeout', '4s']);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(
      refused.stderr,
      new RegExp(
        `device kubernetes\\.io/csi/${DRIVER.replaceAll('.', '\\.')}\\^${handle} at ${globalmount}: CSICallFailed: NodeUnstageVolume failed: rpc error: code = Internal desc = device busy`,
      ),
    );
    // The pod's volume went all the same: its teardown does not wait for the unstage.
    assert.ok(!existsSync(join(c.root, 'pods', uid)), 'the pod directory is gone');
    assert.deepEqual(
      (await mountsBelow(c.root)).map((m) => m.mountPoint),
      [globalmount],
    );

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    const done = await runCli(['drain', '--root-dir', c.root]);
    assert.equal(done.code, 0, done.stderr);
    assert.deepEqual(await mountsBelow(c.root), []);
    assert.ok(!existsSync(join(globalmount, '..')), 'globalmount and its json are gone');
    assert.ok(c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.code === 0));
  },
);
