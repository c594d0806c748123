// CSI volumes end to end: podvol run in cluster mode against the test API
// server, the test CSI driver (real gRPC, real bind mounts) registered through
// the test registrar in <root>/plugins_registry, exactly as a CSI node plugin
// DaemonSet with node-driver-registrar would be deployed next to podvol.
import assert from 'node:assert/strict';
import { readFileSync, statfsSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { sha256Hex } from '../../src/plugins/csi/vol-data.ts';
import { addNode } from '../apiserver/node.ts';
import { startTestApiServer } from '../apiserver/server.ts';
import {
  backingDir,
  backingImage,
  type DriverConfig,
  detachLoops,
  loopDevicesOf,
  readCalls,
  readFormats,
  startTestDriver,
  updateDriverConfig,
  writeDriverConfig,
} from '../csi/driver.ts';
import { startTestRegistrar } from '../csi/registrar.ts';
import { type PodvolProcess, startPodvol, volumeOf, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { at, must } from '../helpers/must.ts';
import { uidOf } from '../helpers/pods.ts';

const DRIVER = 'test.csi.podvol.io';

interface Options {
  driver?: Partial<DriverConfig>;
  /** The CSIDriver object's spec; null for no object at all. */
  csiDriver?: Record<string, unknown> | null;
}

async function csiCluster(t: TestContext, o: Options = {}) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t, 'pv-csi-');
  const kubeconfig = await api.kubeconfigPath(base);
  const s = api.store;
  addNode(s, 'testnode');
  if (o.csiDriver !== null) {
    s.create('csidrivers', {
      metadata: { name: DRIVER },
      spec: { attachRequired: false, ...(o.csiDriver ?? {}) },
    });
  }
  const root = join(base, 'root');
  const stateDir = join(base, 'driver');
  writeDriverConfig(stateDir, {
    name: DRIVER,
    nodeID: 'csi-node-1',
    maxVolumesPerNode: 16,
    topology: { 'topology.test.csi/zone': 'zone-a' },
    capabilities: ['STAGE_UNSTAGE_VOLUME'],
    ...o.driver,
  });
  // The node plugin's DaemonSet: its socket under podvol's plugins dir, the registrar in plugins_registry.
  const pluginSocketDir = join(root, 'plugins', DRIVER);
  await mkdir(pluginSocketDir, { recursive: true });
  await mkdir(join(root, 'plugins_registry'), { recursive: true });
  const driver = await startTestDriver(join(pluginSocketDir, 'csi.sock'), stateDir);
  t.after(() => driver.stop());
  const registrar = await startTestRegistrar({
    registrationDir: join(root, 'plugins_registry'),
    driverName: DRIVER,
    endpoint: driver.socket,
  });
  t.after(() => registrar.stop());
  const start = async (extra: string[] = []) => {
    // No settle guard: the kill -9 scenario restarts with every pod gone on purpose.
    const p = await startPodvol({
      rootDir: root,
      extra: ['--kubeconfig', kubeconfig, '--teardown-settle-period', '0s', ...extra],
    });
    t.after(() => p.stop());
    return p;
  };
  return { api, base, root, stateDir, driver, registrar, start, calls: () => readCalls(stateDir) };
}

type Cluster = Awaited<ReturnType<typeof csiCluster>>;

/** Changes the CSIDriver object's spec, then gives podvol's watch half a second to see it. */
async function updateDriverSpec(c: Cluster, spec: Record<string, unknown>): Promise<void> {
  const drv = c.api.store.mustGet('csidrivers.storage.k8s.io', undefined, DRIVER);
  c.api.store.update('csidrivers.storage.k8s.io', { ...drv, spec: { ...(drv.spec as object), ...spec } });
  await new Promise((r) => setTimeout(r, 500));
}

/** A bound claim: PVC + PV with a csi source. */
function createClaim(
  c: Cluster,
  name: string,
  pv: {
    handle?: string;
    accessModes?: string[];
    fsType?: string;
    attributes?: Record<string, string>;
    /** The PV's spec.csi.readOnly (ControllerPublishVolume's, not NodePublishVolume's). */
    readOnly?: boolean;
  } = {},
) {
  const pvName = `pv-${name}`;
  const claim = c.api.store.create('persistentvolumeclaims', {
    metadata: { name, namespace: 'default' },
    spec: {
      accessModes: pv.accessModes ?? ['ReadWriteOnce'],
      volumeName: pvName,
      resources: { requests: { storage: '1Gi' } },
    },
    status: { phase: 'Bound' },
  });
  c.api.store.create('persistentvolumes', {
    metadata: { name: pvName },
    spec: {
      accessModes: pv.accessModes ?? ['ReadWriteOnce'],
      capacity: { storage: '1Gi' },
      claimRef: { namespace: 'default', name, uid: claim.metadata?.uid },
      csi: {
        driver: DRIVER,
        volumeHandle: pv.handle ?? `handle-${name}`,
        ...(pv.fsType ? { fsType: pv.fsType } : {}),
        ...(pv.readOnly !== undefined ? { readOnly: pv.readOnly } : {}),
        volumeAttributes: pv.attributes ?? { 'attr.example/size': 'small' },
      },
      mountOptions: ['noatime'],
      volumeMode: 'Filesystem',
    },
    status: { phase: 'Bound' },
  });
  return { claim, pvName, handle: pv.handle ?? `handle-${name}` };
}

function claimPod(c: Cluster, name: string, claim: string, extra: Record<string, unknown> = {}) {
  return c.api.store.create('pods', {
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'testnode',
      serviceAccountName: 'default',
      containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
      ...extra,
    },
    status: { phase: 'Running' },
  });
}

async function mounted(p: PodvolProcess, pod: string, volume = 'data') {
  let last: unknown;
  return waitFor(
    `${pod}/${volume} mounted`,
    async () => {
      const v = await volumeOf(p, pod, volume);
      last = v;
      return v?.state === 'mounted' ? v : undefined;
    },
    30_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last status: ${JSON.stringify(last)}`);
  });
}

const deletePod = (c: Cluster, name: string) =>
  c.api.store.delete('pods', 'default', name, { gracePeriodSeconds: 0 });

const methods = (c: Cluster) =>
  c
    .calls()
    .filter((x) => x.method.startsWith('Node') && !['NodeGetCapabilities', 'NodeGetInfo'].includes(x.method));

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
    const csiNode = c.api.store.mustGet('csinodes.storage.k8s.io', undefined, 'testnode') as {
      metadata: { ownerReferences: { kind: string; name: string }[] };
      spec: { drivers: unknown[] };
    };
    assert.deepEqual(csiNode.spec.drivers, [
      {
        name: DRIVER,
        nodeID: 'csi-node-1',
        topologyKeys: ['topology.test.csi/zone'],
        allocatable: { count: 16 },
      },
    ]);
    assert.equal(at(csiNode.metadata.ownerReferences, 0).kind, 'Node');
    const node = c.api.store.mustGet('nodes', undefined, 'testnode') as {
      metadata: { annotations: Record<string, string>; labels: Record<string, string> };
    };
    assert.equal(node.metadata.annotations['csi.volume.kubernetes.io/nodeid'], `{"${DRIVER}":"csi-node-1"}`);
    assert.equal(node.metadata.labels['topology.test.csi/zone'], 'zone-a');
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
      const v = (await volumeOf(p, 'web')) as
        | (Awaited<ReturnType<typeof volumeOf>> & { phase?: string; driver?: string })
        | undefined;
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

function inlinePod(c: Cluster, name: string, extra: Record<string, unknown> = {}) {
  return c.api.store.create('pods', {
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'testnode',
      serviceAccountName: 'default',
      containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'scratch', mountPath: '/s' }] }],
      volumes: [{ name: 'scratch', csi: { driver: DRIVER, volumeAttributes: { size: '1' } } }],
      ...extra,
    },
    status: { phase: 'Running' },
  });
}

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
    const podRo = c.api.store.create('pods', {
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

csiTest(
  'final versus transient errors: NodeStage retried after both; a final error is never unstaged, a transient one is',
  async (t) => {
    const c = await csiCluster(t);
    const fin = createClaim(c, 'fin');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 9, message: 'not ready', times: 2 } };
    });
    claimPod(c, 'pfin', 'fin');
    const p = await c.start();
    const failed = await waitFor('stage failure reported', async () => {
      const v = await volumeOf(p, 'pfin');
      return v?.reason === 'CSICallFailed' ? v : undefined;
    });
    assert.match(
      failed.message,
      /NodeStageVolume failed: rpc error: code = FailedPrecondition desc = not ready/,
    );
    const stagingFin = join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(fin.handle));
    await mounted(p, 'pfin');
    assert.equal(
      c.calls().filter((x) => x.method === 'NodeStageVolume').length,
      3,
      'retried until it worked',
    );
    // kubelet's Events: the step that failed, the PersistentVolume's name, the driver's status as it came.
    const eventMessages = () =>
      c.api.store.list('events', 'default').map((e) => (e as { message?: string }).message ?? '');
    await waitFor('the MountDevice event', () =>
      eventMessages().includes(
        `MountVolume.MountDevice failed for volume "${fin.pvName}" : rpc error: code = FailedPrecondition desc = not ready`,
      ),
    );
    const pub = createClaim(c, 'pub');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodePublishVolume: { code: 13, message: 'boom', times: 1 } };
    });
    claimPod(c, 'ppub', 'pub');
    await mounted(p, 'ppub');
    await waitFor('the SetUp event', () =>
      eventMessages().includes(
        `MountVolume.SetUp failed for volume "${pub.pvName}" : rpc error: code = Internal desc = boom`,
      ),
    );

    // A final error, then the pod goes away: nothing was staged, so no NodeUnstage.
    const fin2 = createClaim(c, 'fin2');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 3, message: 'bad argument' } };
    });
    claimPod(c, 'pfin2', 'fin2');
    await waitFor('final failure', async () => (await volumeOf(p, 'pfin2'))?.reason === 'CSICallFailed');
    deletePod(c, 'pfin2');
    await waitFor(
      'pod gone from status',
      async () => !(await p.status()).pods.some((x) => x.name === 'pfin2'),
    );
    await new Promise((r) => setTimeout(r, 3000));
    assert.ok(
      !c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === fin2.handle),
    );

    // A transient error (DeadlineExceeded), then the pod goes away: the volume may be staged, so NodeUnstage.
    const tr = createClaim(c, 'tr');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = { NodeStageVolume: { code: 4, message: 'slow' } };
    });
    claimPod(c, 'ptr', 'tr');
    await waitFor('transient failure', async () => (await volumeOf(p, 'ptr'))?.reason === 'CSICallUncertain');
    deletePod(c, 'ptr');
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    await waitFor(
      'NodeUnstage after a transient stage error',
      () =>
        c
          .calls()
          .some((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === tr.handle && x.code === 0),
      30_000,
    );
    void stagingFin;
  },
);

csiTest('claims that cannot be used get kubelet reasons; a claim bound later mounts', async (t) => {
  const c = await csiCluster(t);
  const s = c.api.store;
  claimPod(c, 'missing', 'nope');
  s.create('persistentvolumeclaims', {
    metadata: { name: 'pending', namespace: 'default' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    status: { phase: 'Pending' },
  });
  claimPod(c, 'waiting', 'pending');
  const other = s.create('persistentvolumeclaims', {
    metadata: { name: 'stolen', namespace: 'default' },
    spec: { volumeName: 'pv-stolen', accessModes: ['ReadWriteOnce'] },
    status: { phase: 'Bound' },
  });
  s.create('persistentvolumes', {
    metadata: { name: 'pv-stolen' },
    spec: {
      claimRef: { namespace: 'default', name: 'stolen', uid: 'someone-else' },
      csi: { driver: DRIVER, volumeHandle: 'h' },
    },
  });
  claimPod(c, 'mismatch', 'stolen');
  const p = await c.start();
  const reasonOf = (pod: string, reason: string) =>
    waitFor(`${pod}: ${reason}`, async () => {
      const v = await volumeOf(p, pod);
      return v?.reason === reason ? v : undefined;
    });
  const missing = await reasonOf('missing', 'ClaimNotFound');
  assert.equal(
    missing.message,
    'error processing PVC default/nope: failed to fetch PVC from API server: persistentvolumeclaims "nope" not found',
  );
  const pending = await reasonOf('waiting', 'ClaimPending');
  assert.equal(
    pending.message,
    'error processing PVC default/pending: PVC default/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")',
  );
  const mism = await reasonOf('mismatch', 'PersistentVolumeClaimMismatch');
  assert.match(mism.message, new RegExp(`does not point to claim.UID \\(${other.metadata?.uid}\\)`));
  assert.deepEqual(await mountsBelow(join(c.root, 'pods')), [], 'nothing mounted for unusable claims');
  // kubelet's FailedMount Event on the pod whose claim is pending.
  const event = await waitFor('FailedMount event', () =>
    c.api.store
      .list('events', 'default')
      .find(
        (e) =>
          (e as unknown as { reason: string; involvedObject: { name: string } }).reason === 'FailedMount' &&
          (e as unknown as { involvedObject: { name: string } }).involvedObject.name === 'waiting',
      ),
  );
  assert.equal(
    (event as unknown as { message: string }).message,
    'Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: error processing PVC default/pending: PVC default/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")',
  );

  // The pending claim gets bound: the pod's volume mounts without the pod changing.
  const pvc = s.mustGet('persistentvolumeclaims', 'default', 'pending');
  s.create('persistentvolumes', {
    metadata: { name: 'pv-pending' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      claimRef: { namespace: 'default', name: 'pending', uid: pvc.metadata?.uid },
      csi: { driver: DRIVER, volumeHandle: 'h-pending' },
    },
  });
  const bound = s.update('persistentvolumeclaims', {
    ...pvc,
    spec: { ...(pvc.spec as object), volumeName: 'pv-pending' },
  });
  s.update('persistentvolumeclaims', { ...bound, status: { phase: 'Bound' } }, { subresource: 'status' });
  await mounted(p, 'waiting');
});

csiTest('a driver restart re-registers; volumes wait for a driver that is not registered', async (t) => {
  const c = await csiCluster(t);
  // The registrar goes away first: the driver is deregistered and its CSINode entry removed.
  await c.registrar.stop();
  await waitFor(
    'CSINode entry removed',
    () => {
      const n = c.api.store.get('csinodes.storage.k8s.io', undefined, 'testnode') as
        | { spec?: { drivers?: unknown[] } }
        | undefined;
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
  const node = c.api.store.mustGet('nodes', undefined, 'testnode') as {
    metadata: { annotations: Record<string, string> };
  };
  assert.equal(node.metadata.annotations['csi.volume.kubernetes.io/nodeid'], `{"${DRIVER}":"csi-node-1"}`);
  // Removing the registration socket deregisters: the annotation key goes.
  await reg.stop();
  await waitFor('annotation key removed', () => {
    const n = c.api.store.mustGet('nodes', undefined, 'testnode') as {
      metadata: { annotations?: Record<string, string> };
    };
    return !n.metadata.annotations?.['csi.volume.kubernetes.io/nodeid'];
  });
});

csiTest(
  'attachRequired: the volume is reported in use, then waits for volumesAttached and the VolumeAttachment',
  async (t) => {
    // No CSIDriver object: attach is required, as in kubelet.
    const c = await csiCluster(t, { csiDriver: null });
    const { handle } = createClaim(c, 'att');
    claimPod(c, 'web', 'att');
    const p = await c.start();
    const unique = `kubernetes.io/csi/${DRIVER}^${handle}`;
    const nodeStatus = () =>
      c.api.store.mustGet('nodes', undefined, 'testnode') as unknown as {
        metadata: { name: string };
        status: { volumesInUse?: string[]; volumesAttached?: { name: string; devicePath: string }[] };
      };
    await waitFor('reported in use', () => nodeStatus().status.volumesInUse?.includes(unique));
    const pending = await waitFor('attach pending', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' ? v : undefined;
    });
    assert.match(pending.message, /VolumesInUse|VolumesAttached/);
    assert.equal(
      c.calls().filter((x) => x.method === 'NodeStageVolume').length,
      0,
      'nothing staged before attach',
    );
    // Retried, and no FailedMount Event for any of the retries while it waits (kubelet posts none).
    await waitFor('retried while pending', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' && v.attempts >= 3;
    });
    assert.deepEqual(failedMounts(c, 'web'), []);

    // The attach/detach controller and external-attacher do their part.
    const vaName = `csi-${sha256Hex(`${handle}${DRIVER}testnode`)}`;
    const va = c.api.store.create('volumeattachments.storage.k8s.io', {
      metadata: { name: vaName },
      spec: { attacher: DRIVER, nodeName: 'testnode', source: { persistentVolumeName: 'pv-att' } },
    });
    c.api.store.update(
      'volumeattachments.storage.k8s.io',
      {
        ...va,
        status: { attached: false, attachError: { message: 'disk busy', time: new Date().toISOString() } },
      },
      { subresource: 'status' },
    );
    const n = nodeStatus();
    c.api.store.update(
      'nodes',
      { ...n, status: { ...n.status, volumesAttached: [{ name: unique, devicePath: '' }] } },
      { subresource: 'status' },
    );
    const failed = await waitFor(
      'attach error',
      async () => {
        const v = await volumeOf(p, 'web');
        return v?.reason === 'AttachFailed' ? v : undefined;
      },
      30_000,
    );
    assert.match(failed.message, /disk busy/);
    // An attach error ends kubelet's WaitForAttach at once: its Event, with the attacher's message as it is.
    await waitFor('the WaitForAttach event', () =>
      failedMounts(c, 'web').includes('MountVolume.WaitForAttach failed for volume "pv-att" : disk busy'),
    );
    const cur = c.api.store.mustGet('volumeattachments.storage.k8s.io', undefined, vaName);
    c.api.store.update(
      'volumeattachments.storage.k8s.io',
      { ...cur, status: { attached: true, attachmentMetadata: { devicePath: '/dev/fake0' } } },
      { subresource: 'status' },
    );
    await mounted(p, 'web');
    const stage = c.calls().find((x) => x.method === 'NodeStageVolume' && x.code === 0);
    assert.deepEqual(stage?.request.publish_context, { devicePath: '/dev/fake0' });
    const publish = c.calls().find((x) => x.method === 'NodePublishVolume' && x.code === 0);
    assert.deepEqual(publish?.request.publish_context, { devicePath: '/dev/fake0' });

    // Torn down: the volume leaves volumesInUse only after it is unmounted.
    deletePod(c, 'web');
    await waitFor(
      'no longer in use',
      () => !(nodeStatus().status.volumesInUse ?? []).includes(unique),
      30_000,
    );
    assert.ok(c.calls().some((x) => x.method === 'NodeUnstageVolume' && x.code === 0));
  },
);

/** The messages of the pod's Warning FailedMount Events. */
function failedMounts(c: Cluster, pod: string): string[] {
  return c.api.store
    .list('events', 'default')
    .map((e) => e as { reason?: string; message?: string; involvedObject?: { name?: string } })
    .filter((e) => e.reason === 'FailedMount' && e.involvedObject?.name === pod)
    .map((e) => e.message ?? '');
}

csiTest(
  'attachRequired: the attach wait posts no Event until its timeout, then one MountVolume.WaitForAttach Event',
  async (t) => {
    const c = await csiCluster(t, { csiDriver: null });
    const { pvName, handle } = createClaim(c, 'slow');
    claimPod(c, 'web', 'slow');
    const p = await c.start(['--wait-for-attach-timeout', '1s']);
    const unique = `kubernetes.io/csi/${DRIVER}^${handle}`;
    // Not yet in volumesAttached (kubelet's VerifyControllerAttachedVolume): retried past the
    // timeout and still no Event, as the attach wait has not begun.
    await waitFor('retried before volumesAttached', async () => {
      const v = await volumeOf(p, 'web');
      return v?.reason === 'AttachPending' && v.attempts >= 4;
    });
    assert.deepEqual(failedMounts(c, 'web'), []);
    // Listed as attached, but its VolumeAttachment is never attached: the wait times out.
    const n = c.api.store.mustGet('nodes', undefined, 'testnode') as {
      metadata: { name: string };
      status?: object;
    };
    c.api.store.update(
      'nodes',
      { ...n, status: { ...n.status, volumesAttached: [{ name: unique, devicePath: '' }] } },
      { subresource: 'status' },
    );
    const timedOut = `MountVolume.WaitForAttach failed for volume "${pvName}" : timed out waiting for external-attacher of ${DRIVER} CSI driver to attach volume ${handle}`;
    await waitFor('the WaitForAttach timeout event', () => failedMounts(c, 'web').includes(timedOut), 60_000);
    // Every Event the pod got is that one: none for the retries of the wait.
    assert.deepEqual([...new Set(failedMounts(c, 'web'))], [timedOut]);
    assert.equal(c.calls().filter((x) => x.method === 'NodeStageVolume').length, 0, 'nothing staged');
  },
);

/** The attach/detach controller and external-attacher, done: a VolumeAttachment attached and the node's volumesAttached. */
function attach(c: Cluster, handles: string[]): void {
  for (const handle of handles) {
    const va = c.api.store.create('volumeattachments.storage.k8s.io', {
      metadata: { name: `csi-${sha256Hex(`${handle}${DRIVER}testnode`)}` },
      spec: { attacher: DRIVER, nodeName: 'testnode', source: { persistentVolumeName: `pv-${handle}` } },
    });
    c.api.store.update(
      'volumeattachments.storage.k8s.io',
      { ...va, status: { attached: true, attachmentMetadata: {} } },
      { subresource: 'status' },
    );
  }
  const n = c.api.store.mustGet('nodes', undefined, 'testnode') as {
    metadata: { name: string };
    status?: object;
  };
  c.api.store.update(
    'nodes',
    {
      ...n,
      status: {
        ...n.status,
        volumesAttached: handles.map((h) => ({ name: `kubernetes.io/csi/${DRIVER}^${h}`, devicePath: '' })),
      },
    },
    { subresource: 'status' },
  );
}

csiTest(
  'attachRequired: a volume stays in volumesInUse until a NodeUnstageVolume succeeds (a failing unstage, an uncertain stage)',
  async (t) => {
    // No CSIDriver object: attach is required, as in kubelet.
    const c = await csiCluster(t, { csiDriver: null });
    const keep = createClaim(c, 'keep', { handle: 'keep' });
    const unc = createClaim(c, 'unc', { handle: 'unc' });
    attach(c, [keep.handle, unc.handle]);
    claimPod(c, 'web', 'keep');
    const p = await c.start();
    await mounted(p, 'web');
    const inUse = () =>
      (c.api.store.mustGet('nodes', undefined, 'testnode') as { status?: { volumesInUse?: string[] } }).status
        ?.volumesInUse ?? [];
    const unstages = (handle: string) =>
      c.calls().filter((x) => x.method === 'NodeUnstageVolume' && x.request.volume_id === handle);
    // Every look: a volume not yet unstaged must be in volumesInUse. The node is read
    // before the call log, so a volume that left the list after its unstage is never
    // taken for one that left before (the driver logs a call before it answers).
    const early: string[] = [];
    const check = () => {
      const listed = inUse();
      for (const handle of [keep.handle, unc.handle]) {
        const unique = `kubernetes.io/csi/${DRIVER}^${handle}`;
        if (!listed.includes(unique) && !unstages(handle).some((x) => x.code === 0)) early.push(handle);
      }
    };

    // The driver refuses every NodeUnstageVolume, and times out the second volume's NodeStageVolume.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {
        NodeUnstageVolume: { code: 13, message: 'device busy' },
        NodeStageVolume: { code: 4, message: 'slow' },
      };
    });
    claimPod(c, 'unc', 'unc');
    await waitFor(
      'the uncertain stage',
      async () => (await volumeOf(p, 'unc'))?.reason === 'CSICallUncertain',
    );
    deletePod(c, 'web');
    deletePod(c, 'unc');
    // Both pods' volumes torn down, and the unstage of each refused a few times, by the
    // TearDown and then by the housekeeping sweep that retries it.
    await waitFor(
      'both pods gone and three refused unstages each',
      async () => {
        check();
        const pods = (await p.status()).pods.map((x) => x.name);
        return (
          !pods.includes('web') &&
          !pods.includes('unc') &&
          unstages(keep.handle).filter((x) => x.code === 13).length >= 3 &&
          unstages(unc.handle).filter((x) => x.code === 13).length >= 3
        );
      },
      60_000,
    );
    assert.deepEqual(early, [], 'left volumesInUse while still staged');

    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.errors = {};
    });
    await waitFor(
      'both unstaged and out of volumesInUse',
      () => {
        check();
        return inUse().length === 0;
      },
      30_000,
    );
    assert.deepEqual(early, [], 'left volumesInUse while still staged');
    assert.ok(unstages(keep.handle).some((x) => x.code === 0));
    assert.ok(unstages(unc.handle).some((x) => x.code === 0));
  },
);

csiTest(
  'metrics: csi_operations_seconds per call and kubelet_volume_stats_* from NodeGetVolumeStats',
  async (t) => {
    const c = await csiCluster(t, { driver: { capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS'] } });
    createClaim(c, 'stats');
    claimPod(c, 'web', 'stats');
    // A generic ephemeral volume: kubelet labels its stats with the pod-owned claim <pod>-<volume>.
    const gen = c.api.store.create('pods', {
      metadata: { name: 'gen', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/s' }] }],
        volumes: [
          {
            name: 'data',
            ephemeral: {
              volumeClaimTemplate: {
                spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
              },
            },
          },
        ],
      },
      status: { phase: 'Running' },
    });
    const owned = c.api.store.create('persistentvolumeclaims', {
      metadata: {
        name: 'gen-data',
        namespace: 'default',
        ownerReferences: [
          { apiVersion: 'v1', kind: 'Pod', name: 'gen', uid: gen.metadata?.uid, controller: true },
        ],
      },
      spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-gen-data' },
      status: { phase: 'Bound' },
    });
    c.api.store.create('persistentvolumes', {
      metadata: { name: 'pv-gen-data' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        claimRef: { namespace: 'default', name: 'gen-data', uid: owned.metadata?.uid },
        csi: { driver: DRIVER, volumeHandle: 'handle-gen-data' },
      },
    });
    // kubelet refreshes volume stats every --volume-stats-agg-period (not --sync-frequency, left at 1m).
    const p = await c.start(['--volume-stats-agg-period', '1s']);
    await mounted(p, 'web');
    await mounted(p, 'gen');
    const metric = async (re: RegExp) => re.exec((await p.get('/metrics')).body) ?? undefined;
    const cap = await waitFor('volume stats', () =>
      metric(
        /^kubelet_volume_stats_capacity_bytes\{namespace="default",persistentvolumeclaim="stats"\} (\d+)/m,
      ),
    );
    assert.ok(Number(cap[1]) > 0);
    assert.ok(
      await metric(
        /^kubelet_volume_stats_inodes_used\{namespace="default",persistentvolumeclaim="stats"\} \d+/m,
      ),
    );
    await waitFor('ephemeral claim stats', () =>
      metric(/^kubelet_volume_stats_used_bytes\{namespace="default",persistentvolumeclaim="gen-data"\} \d+/m),
    );
    // One NodePublishVolume per pod.
    assert.ok(
      await metric(
        new RegExp(
          `^csi_operations_seconds_count\\{driver_name="${DRIVER.replaceAll('.', '\\.')}",method_name="/csi\\.v1\\.Node/NodePublishVolume",grpc_status_code="OK",migrated="false"\\} 2$`,
          'm',
        ),
      ),
    );
    const stats = c.calls().find((x) => x.method === 'NodeGetVolumeStats' && x.code === 0);
    assert.ok(stats);
    // kubelet's request: the volume and the pod's target path, no staging path (proto default '').
    assert.equal(stats.request.staging_target_path, '');
    assert.match(String(stats.request.volume_path), /\/volumes\/kubernetes\.io~csi\/pv-[^/]+\/mount$/);
  },
);

csiTest(
  'generic ephemeral volumes use the pod-owned claim <pod>-<volume>; hostile handles and driver names stay inside podvol dirs',
  async (t) => {
    const c = await csiCluster(t);
    const s = c.api.store;
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
        ownerReferences: [
          { apiVersion: 'v1', kind: 'Pod', name: 'gen', uid: pod.metadata?.uid, controller: true },
        ],
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

/**
 * What the external-resizer leaves after ControllerExpandVolume with
 * node_expansion_required: the PV at `to`, the claim still at `from` and
 * NodeResizePending (with `status` added).
 */
function nodeExpansionPending(
  c: Cluster,
  pvName: string,
  claimName: string,
  from: string,
  to: string,
  status: Record<string, unknown> = {},
): void {
  const pv = c.api.store.mustGet('persistentvolumes', undefined, pvName);
  c.api.store.update('persistentvolumes', {
    ...pv,
    spec: { ...(pv.spec as object), capacity: { storage: to } },
  });
  c.api.store.update(
    'persistentvolumeclaims',
    {
      ...c.api.store.mustGet('persistentvolumeclaims', 'default', claimName),
      status: {
        phase: 'Bound',
        capacity: { storage: from },
        allocatedResourceStatuses: { storage: 'NodeResizePending' },
        ...status,
      },
    },
    { subresource: 'status' },
  );
}

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
    const after = c.api.store.mustGet('persistentvolumeclaims', 'default', 'grow') as unknown as {
      status: { capacity: { storage: string }; allocatedResourceStatuses?: Record<string, string> };
    };
    assert.equal(after.status.capacity.storage, '2Gi');
    assert.equal(after.status.allocatedResourceStatuses?.storage, undefined);
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
      const x = c.api.store.mustGet('persistentvolumeclaims', 'default', 'grow') as unknown as {
        status: {
          capacity: { storage: string };
          allocatedResourceStatuses?: Record<string, string>;
          conditions?: { type: string }[];
        };
      };
      return x.status.capacity.storage === '3Gi' ? x : undefined;
    });
    assert.equal(done.status.allocatedResourceStatuses, undefined);
    assert.deepEqual(
      done.status.conditions?.map((x) => x.type),
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
      c.api.store
        .list('events', 'default')
        .find((e) => (e as { reason?: string }).reason === 'FileSystemResizeSuccessful'),
    );
    assert.equal(
      (event as { message?: string }).message,
      `MountVolume.NodeExpandVolume succeeded for volume "${pvName}" testnode`,
    );
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
    type Claim = {
      status?: { capacity?: { storage?: string }; conditions?: { type: string; message?: string }[] };
    };
    const claimNow = () => c.api.store.mustGet('persistentvolumeclaims', 'default', 'blk') as Claim;
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
    c.api.store.create('pods', {
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

/** CAP_SYS_RESOURCE (bit 24 of CapEff): what resize2fs needs to grow a mounted ext4. */
function canResizeMountedExt4(): boolean {
  const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
  return (BigInt(`0x${eff}`) & (1n << 24n)) !== 0n;
}

/** For debugging: CSI_ONLY="a|b" runs only the scenarios whose names contain a or b (CI leaves it unset). */
function csiTest(name: string, fn: (t: TestContext) => Promise<void>): void {
  const only = process.env.CSI_ONLY;
  if (!only || only.split('|').some((x) => name.includes(x))) mountTest(name, fn);
}
