// CSI volumes end to end (harness.ts): NodeExpandVolume during mount and online, and the
// loop-device driver's real ext4 (format once, grow).
import assert from 'node:assert/strict';
import { statfsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import {
  backingImage,
  detachLoops,
  loopDevicesOf,
  readFormats,
  updateDriverConfig,
} from '../../csi/driver.ts';
import { volumeOf, waitFor, waitGone } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { uidOf } from '../../helpers/pods.ts';
import {
  canResizeMountedExt4,
  claimPod,
  createClaim,
  csiCluster,
  csiTest,
  DRIVER,
  deletePod,
  mounted,
  nodeExpansionPending,
} from './harness.ts';

csiTest(
  'expansion during mount: NodeExpandVolume when the claim says NodeResizePending, then the claim status',
  async (t) => {
    const c = await csiCluster(t, { driver: { capabilities: ['STAGE_UNSTAGE_VOLUME', 'EXPAND_VOLUME'] } });
    const { handle } = createClaim(c, 'grow');
    nodeExpansionPending(c, 'pv-grow', 'grow', '1Gi', '2Gi');
    claimPod(c, 'web', 'grow');
    const p = await c.start();
    await mounted(p, 'web');
    const expand = c.calls().find((x) => x.method === 'NodeExpandVolume' && x.code === 0);
    assert.equal(expand?.request.volume_id, handle);
    assert.deepEqual(expand?.request.capacity_range, {
      required_bytes: String(2 * 1024 ** 3),
      limit_bytes: '0',
    });
    assert.equal(
      expand?.request.staging_target_path,
      join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle), 'globalmount'),
    );
    const after = c.store.mustGet('persistentvolumeclaims', 'default', 'grow');
    assert.equal(after.status?.capacity?.storage, '2Gi');
    assert.equal(after.status?.allocatedResourceStatuses?.storage, undefined);
  },
);

csiTest(
  'online expansion: a mounted volume grows when its claim says NodeResizePending, the claim marked in progress then done',
  async (t) => {
    const c = await csiCluster(t, { driver: { capabilities: ['STAGE_UNSTAGE_VOLUME', 'EXPAND_VOLUME'] } });
    const { claim, handle, pvName } = createClaim(c, 'grow');
    const pod = claimPod(c, 'web', 'grow');
    const uid = uidOf(pod);
    const p = await c.start();
    await mounted(p, 'web');
    assert.equal(c.calls().filter((x) => x.method === 'NodeExpandVolume').length, 0);

    // The first NodeExpandVolume fails transiently: the claim stays in progress and the call is retried.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeExpandVolume: { code: 14, message: 'busy', times: 1 } };
    });
    c.api.hooks.clearRequests();
    nodeExpansionPending(c, pvName, 'grow', '1Gi', '3Gi', {
      allocatedResources: { storage: '3Gi' },
      conditions: [
        { type: 'FileSystemResizePending', status: 'True' },
        { type: 'ModifyingVolume', status: 'True' },
      ],
    });
    const expanded = await waitFor(
      'NodeExpandVolume succeeded',
      () => c.calls().find((x) => x.method === 'NodeExpandVolume' && x.code === 0),
      60_000,
    );
    assert.deepEqual(
      c
        .calls()
        .filter((x) => x.method === 'NodeExpandVolume')
        .map((x) => x.code),
      [14, 0],
    );
    assert.deepEqual(expanded.request.capacity_range, {
      required_bytes: String(3 * 1024 ** 3),
      limit_bytes: '0',
    });
    assert.equal(expanded.request.volume_id, handle);
    assert.equal(
      expanded.request.volume_path,
      join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName, 'mount'),
    );
    assert.equal(
      expanded.request.staging_target_path,
      join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle), 'globalmount'),
    );
    const done = await waitFor('the claim updated', () => {
      const x = c.store.mustGet('persistentvolumeclaims', 'default', 'grow');
      return x.status?.capacity?.storage === '3Gi' ? x : undefined;
    });
    assert.equal(done.status?.allocatedResourceStatuses, undefined);
    assert.deepEqual(
      done.status?.conditions?.map((x) => x.type),
      ['ModifyingVolume'],
      'resize conditions cleared, others kept',
    );
    // kubelet's order: marked in progress (guarded by the resourceVersion) before the driver is called.
    const patches = c.api.hooks.requests
      .filter(
        (r) => r.method === 'PATCH' && r.resource === 'persistentvolumeclaims' && r.subresource === 'status',
      )
      .map((r) => r.body as { metadata?: { resourceVersion?: string }; status: Record<string, unknown> });
    assert.deepEqual(patches[0]?.status, { allocatedResourceStatuses: { storage: 'NodeResizeInProgress' } });
    assert.ok(patches[0]?.metadata?.resourceVersion, 'the in-progress mark carries the resourceVersion');
    assert.equal(patches.length, 2, 'in progress once, done once (the retry found it in progress)');
    const event = await waitFor('FileSystemResizeSuccessful', () =>
      c.store.list('events', 'default').find((e) => e.reason === 'FileSystemResizeSuccessful'),
    );
    assert.equal(event.message, `MountVolume.NodeExpandVolume succeeded for volume "${pvName}" testnode`);
    // Still mounted, never unmounted: the same mount served the pod throughout.
    assert.equal((await volumeOf(p, 'web'))?.state, 'mounted');
    assert.equal(c.calls().filter((x) => x.method === 'NodeUnpublishVolume').length, 0);
    void claim;
  },
);

csiTest(
  'loop-device driver: NodeStage formats a new device once and mounts it, pods get binds of it, expansion grows the filesystem (or says why not)',
  async (t) => {
    const c = await csiCluster(t, {
      driver: { backend: 'loop', capabilities: ['STAGE_UNSTAGE_VOLUME', 'EXPAND_VOLUME'] },
    });
    t.after(() => detachLoops(c.stateDir));
    const { handle, pvName } = createClaim(c, 'blk', { fsType: 'ext4' });
    const first = claimPod(c, 'one', 'blk');
    const p = await c.start();
    await mounted(p, 'one');
    const staging = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle), 'globalmount');
    const target = (uid: string) =>
      join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName, 'mount');
    const table = await mountsBelow(c.root);
    const stagingMount = table.find((m) => m.mountPoint === staging);
    const [device] = await loopDevicesOf(backingImage(c.stateDir, handle));
    assert.ok(device?.startsWith('/dev/loop'), `a loop device for the volume (${device})`);
    assert.equal(stagingMount?.source, device);
    assert.equal(stagingMount?.fsType, 'ext4');
    const podMount = table.find((m) => m.mountPoint === target(uidOf(first)));
    assert.equal(podMount?.fsType, 'ext4', 'the pod sees the staged filesystem');
    assert.deepEqual(readFormats(c.stateDir), [{ volume_id: handle, device, fsType: 'ext4' }]);
    await writeFile(join(target(uidOf(first)), 'kept'), 'on ext4');

    // Last pod gone: unpublished, unstaged, the loop device detached.
    deletePod(c, 'one');
    await waitGone('staging directory', join(staging, '..'), 60_000);
    assert.deepEqual(await loopDevicesOf(backingImage(c.stateDir, handle)), []);

    // A new pod: the device has a filesystem now, so it is mounted, not formatted again.
    const second = claimPod(c, 'two', 'blk');
    await mounted(p, 'two');
    assert.equal(readFormats(c.stateDir).length, 1, 'formatted once');
    assert.equal(await readFile(join(target(uidOf(second)), 'kept'), 'utf8'), 'on ext4');

    // Online expansion grows the real filesystem under the running pod.
    const before = statfsSync(target(uidOf(second)));
    nodeExpansionPending(c, pvName, 'blk', '32Mi', '64Mi');
    const claimNow = () => c.store.mustGet('persistentvolumeclaims', 'default', 'blk');
    if (canResizeMountedExt4()) {
      await waitFor('the claim grown', () => claimNow().status?.capacity?.storage === '64Mi', 60_000);
      const after = statfsSync(target(uidOf(second)));
      assert.ok(
        after.blocks * after.bsize > before.blocks * before.bsize * 1.5,
        `filesystem grew: ${before.blocks * before.bsize} -> ${after.blocks * after.bsize} bytes`,
      );
    } else {
      // Without CAP_SYS_RESOURCE (this VM) resize2fs cannot grow a mounted ext4: the driver's final
      // error becomes the claim's NodeResizeError condition, and the pod keeps its mounted volume.
      const failed = await waitFor(
        'NodeResizeError on the claim',
        () => claimNow().status?.conditions?.find((x) => x.type === 'NodeResizeError'),
        60_000,
      );
      assert.match(
        failed.message ?? '',
        /^failed to expand pvc with rpc error: code = Internal desc = resize2fs \/dev\/loop\d+: /,
      );
      assert.equal(claimNow().status?.capacity?.storage, '32Mi');
      assert.equal((await volumeOf(p, 'two'))?.state, 'mounted');
    }
    deletePod(c, 'two');
    await waitGone('staging directory', join(staging, '..'), 60_000);
    assert.deepEqual(await loopDevicesOf(backingImage(c.stateDir, handle)), []);
  },
);
