// CSI volumes end to end (harness.ts): inline ephemeral volumes, requiresRepublish,
// and generic ephemeral volumes with hostile handles and driver names.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { volumeOf, waitFor, waitGone } from '../../helpers/daemon.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { must } from '../../helpers/must.ts';
import { uidOf } from '../../helpers/pods.ts';
import {
  claimPod,
  createClaim,
  csiCluster,
  csiTest,
  DRIVER,
  deletePod,
  inlinePod,
  mounted,
  updateDriverSpec,
} from './harness.ts';

csiTest(
  'inline ephemeral volumes: generated handle, no stage, pod info and tokens, only with the Ephemeral mode',
  async (t) => {
    const c = await csiCluster(t, {
      csiDriver: {
        podInfoOnMount: true,
        volumeLifecycleModes: ['Ephemeral'],
        tokenRequests: [{ audience: 'vault', expirationSeconds: 3600 }, { audience: '' }],
        requiresRepublish: true,
      },
    });
    const pod = inlinePod(c, 'eph');
    const uid = uidOf(pod);
    const p = await c.start();
    const v = await mounted(p, 'eph', 'scratch');
    const dir = join(c.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', 'scratch');
    assert.equal(v.path, join(dir, 'mount'));
    const handle = `csi-${sha256Hex(`${uid}scratch`)}`;
    const data = JSON.parse(await readFile(join(dir, 'vol_data.json'), 'utf8'));
    assert.equal(data.volumeHandle, handle);
    assert.equal(data.volumeLifecycleMode, 'Ephemeral');
    assert.equal(data.specVolID, 'scratch');
    assert.equal(c.calls().filter((x) => x.method === 'NodeStageVolume').length, 0);
    const publish = c.calls().find((x) => x.method === 'NodePublishVolume' && x.code === 0);
    const ctx = publish?.request.volume_context as Record<string, string>;
    assert.equal(ctx['csi.storage.k8s.io/ephemeral'], 'true');
    assert.equal(ctx['csi.storage.k8s.io/pod.uid'], uid);
    assert.equal(ctx.size, '1');
    const tokens = JSON.parse(
      must(ctx['csi.storage.k8s.io/serviceAccount.tokens'], 'the tokens in the volume context'),
    );
    assert.deepEqual(Object.keys(tokens), ['', 'vault']);
    const issued = c.api.hooks.issuedTokens.filter((x) => x.boundObjectRef?.uid === uid);
    assert.ok(issued.some((x) => x.token === tokens.vault.token && x.audiences?.[0] === 'vault'));
    assert.match(tokens.vault.expirationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.deepEqual(publish?.request.volume_capability, {
      mount: { fs_type: '', mount_flags: [], volume_mount_group: '' },
      access_mode: { mode: 'SINGLE_NODE_WRITER' },
      access_type: 'mount',
    });
    // requiresRepublish: a CSIDriver with it makes podvol publish again each sync period.
    const publishes = () => c.calls().filter((x) => x.method === 'NodePublishVolume').length;
    const before = publishes();
    assert.ok(before >= 1);

    deletePod(c, 'eph');
    await waitGone('inline volume torn down', join(c.root, 'pods', uid));
    assert.ok(c.calls().some((x) => x.method === 'NodeUnpublishVolume' && x.request.volume_id === handle));
    assert.equal(c.calls().filter((x) => x.method === 'NodeUnstageVolume').length, 0);

    // A driver without the Ephemeral mode refuses inline volumes with a precise reason.
    await updateDriverSpec(c, { volumeLifecycleModes: ['Persistent'] });
    inlinePod(c, 'eph2');
    const bad = await waitFor('eph2 refused', async () => {
      const x = await volumeOf(p, 'eph2', 'scratch');
      return x?.reason === 'LifecycleModeNotSupported' ? x : undefined;
    });
    assert.match(bad.message, /volume mode "Ephemeral" not supported by driver/);
  },
);

csiTest('requiresRepublish: NodePublishVolume again every sync period', async (t) => {
  const c = await csiCluster(t, { csiDriver: { requiresRepublish: true } });
  createClaim(c, 'rr');
  claimPod(c, 'web', 'rr');
  const p = await c.start(['--sync-frequency', '1s']);
  await mounted(p, 'web');
  const publishes = () => c.calls().filter((x) => x.method === 'NodePublishVolume' && x.code === 0).length;
  await waitFor('published again', () => publishes() >= 3, 30_000);
  assert.equal(c.calls().filter((x) => x.method === 'NodeStageVolume').length, 1, 'staged once');
});

csiTest(
  'generic ephemeral volumes use the pod-owned claim <pod>-<volume>; hostile handles and driver names stay inside podvol dirs',
  async (t) => {
    const c = await csiCluster(t);
    const s = c.store;
    const ephVolume = {
      name: 'scratch',
      ephemeral: {
        volumeClaimTemplate: {
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
        },
      },
    };
    const pod = s.create('pods', {
      metadata: { name: 'gen', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'scratch', mountPath: '/s' }] }],
        volumes: [ephVolume],
      },
      status: { phase: 'Running' },
    });
    const owned = s.create('persistentvolumeclaims', {
      metadata: {
        name: 'gen-scratch',
        namespace: 'default',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'gen', uid: uidOf(pod), controller: true }],
      },
      spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-gen' },
      status: { phase: 'Bound' },
    });
    // A handle full of path characters: it only ever appears hashed in a path.
    const hostile = '../../../../etc/evil/..';
    s.create('persistentvolumes', {
      metadata: { name: 'pv-gen' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        claimRef: { namespace: 'default', name: 'gen-scratch', uid: owned.metadata?.uid },
        csi: { driver: DRIVER, volumeHandle: hostile },
      },
    });
    // Same shape, but the claim belongs to someone else.
    s.create('pods', {
      metadata: { name: 'thief', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'scratch', mountPath: '/s' }] }],
        volumes: [ephVolume],
      },
      status: { phase: 'Running' },
    });
    s.create('persistentvolumeclaims', {
      metadata: { name: 'thief-scratch', namespace: 'default' },
      spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-gen' },
      status: { phase: 'Bound' },
    });
    // A driver name that is a path.
    const badClaim = s.create('persistentvolumeclaims', {
      metadata: { name: 'bad', namespace: 'default' },
      spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-bad' },
      status: { phase: 'Bound' },
    });
    s.create('persistentvolumes', {
      metadata: { name: 'pv-bad' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        claimRef: { namespace: 'default', name: 'bad', uid: badClaim.metadata?.uid },
        csi: { driver: '../../../tmp', volumeHandle: 'h' },
      },
    });
    claimPod(c, 'badpod', 'bad');

    const p = await c.start();
    const v = await mounted(p, 'gen', 'scratch');
    assert.equal(v.path, join(c.root, 'pods', uidOf(pod), 'volumes', 'kubernetes.io~csi', 'pv-gen', 'mount'));
    const staged = c.calls().find((x) => x.method === 'NodeStageVolume' && x.code === 0);
    assert.equal(staged?.request.volume_id, hostile);
    assert.equal(
      staged?.request.staging_target_path,
      join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(hostile), 'globalmount'),
    );
    const thief = await waitFor('not owned', async () => {
      const x = await volumeOf(p, 'thief', 'scratch');
      return x?.reason === 'ClaimNotOwnedByPod' ? x : undefined;
    });
    assert.equal(
      thief.message,
      'error processing PVC default/thief-scratch: PVC default/thief-scratch was not created for pod default/thief (pod is not owner)',
    );
    const bad = await waitFor('bad driver name', async () => {
      const x = await volumeOf(p, 'badpod');
      return x?.reason === 'InvalidDriverName' ? x : undefined;
    });
    assert.match(bad.message, /is not a valid driver name/);
    // Every mount is under podvol's root.
    const outside = (await mountsBelow('/')).filter((m) => m.mountPoint.includes('evil'));
    assert.deepEqual(outside, []);
  },
);
