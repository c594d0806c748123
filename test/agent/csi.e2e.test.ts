// CSI volumes end to end: podvol run in cluster mode against the test API
// server, the test CSI driver (real gRPC, real bind mounts) registered through
// the test registrar in <root>/plugins_registry, exactly as a CSI node plugin
// DaemonSet with node-driver-registrar would be deployed next to podvol.
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { sha256Hex } from '../../src/plugins/csi/vol-data.ts';
import { startTestApiServer } from '../apiserver/server.ts';
import {
  backingDir,
  type DriverConfig,
  readCalls,
  startTestDriver,
  updateDriverConfig,
  writeDriverConfig,
} from '../csi/driver.ts';
import { startTestRegistrar } from '../csi/registrar.ts';
import { mountsBelow, type PodvolProcess, startPodvol, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

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
  s.create('nodes', {
    metadata: { name: 'testnode', labels: { 'kubernetes.io/hostname': 'testnode' } },
    status: {
      allocatable: { cpu: '2', memory: '4Gi' },
      addresses: [{ type: 'InternalIP', address: '10.0.0.7' }],
    },
  });
  s.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
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
  const start = async () => {
    const p = await startPodvol({ rootDir: root, extra: ['--kubeconfig', kubeconfig] });
    t.after(() => p.stop());
    return p;
  };
  return { api, base, root, stateDir, driver, registrar, start, calls: () => readCalls(stateDir) };
}

type Cluster = Awaited<ReturnType<typeof csiCluster>>;

/** A bound claim: PVC + PV with a csi source. */
function createClaim(
  c: Cluster,
  name: string,
  pv: { handle?: string; accessModes?: string[]; fsType?: string; attributes?: Record<string, string> } = {},
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

const volumeOf = async (p: PodvolProcess, pod: string, volume = 'data') =>
  (await p.status()).pods.find((x) => x.name === pod)?.volumes.find((v) => v.name === volume);

const mounted = (p: PodvolProcess, pod: string, volume = 'data') =>
  waitFor(
    `${pod}/${volume} mounted`,
    async () => {
      const v = await volumeOf(p, pod, volume);
      return v?.state === 'mounted' ? v : undefined;
    },
    30_000,
  );

const deletePod = (c: Cluster, name: string) =>
  c.api.store.delete('pods', 'default', name, { gracePeriodSeconds: 0 });

const methods = (c: Cluster) =>
  c
    .calls()
    .filter((x) => x.method.startsWith('Node') && !['NodeGetCapabilities', 'NodeGetInfo'].includes(x.method));

mountTest(
  'a bound PVC is staged then published, with kubelet paths, vol_data.json bytes and node info',
  async (t) => {
    const c = await csiCluster(t, { csiDriver: { podInfoOnMount: true } });
    const { pvName, handle } = createClaim(c, 'data1');
    const pod = claimPod(c, 'web', 'data1');
    const uid = pod.metadata?.uid as string;
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
    assert.equal(csiNode.metadata.ownerReferences[0].kind, 'Node');
    const node = c.api.store.mustGet('nodes', undefined, 'testnode') as {
      metadata: { annotations: Record<string, string>; labels: Record<string, string> };
    };
    assert.equal(node.metadata.annotations['csi.volume.kubernetes.io/nodeid'], `{"${DRIVER}":"csi-node-1"}`);
    assert.equal(node.metadata.labels['topology.test.csi/zone'], 'zone-a');
    assert.deepEqual(await c.registrar.status, { plugin_registered: true, error: '' });
  },
);

mountTest(
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
    await waitGone('pod a torn down', join(c.root, 'pods', a.metadata?.uid as string));
    assert.equal(count('NodeUnpublishVolume'), 1);
    assert.equal(count('NodeUnstageVolume'), 0, 'b still uses the staged volume');
    assert.ok((await mountsBelow(c.root)).some((m) => m.mountPoint === join(stagingDir, 'globalmount')));

    deletePod(c, 'b');
    await waitGone('pod b torn down', join(c.root, 'pods', b.metadata?.uid as string));
    await waitGone('staging directory removed', stagingDir);
    assert.equal(count('NodeUnpublishVolume'), 2);
    assert.equal(count('NodeUnstageVolume'), 1);
    const order = methods(c).map((x) => x.method);
    assert.equal(order.at(-1), 'NodeUnstageVolume');
    assert.deepEqual(await mountsBelow(c.root), []);
    void pvName;
  },
);

mountTest(
  'kill -9 between stage and publish, and between unpublish and unstage: the restart finishes the job',
  async (t) => {
    const c = await csiCluster(t);
    const { pvName, handle } = createClaim(c, 'k9');
    const pod = claimPod(c, 'web', 'k9');
    const uid = pod.metadata?.uid as string;
    // NodePublish hangs: podvol is killed after NodeStage succeeded.
    updateDriverConfig(c.stateDir, (cfg) => {
      cfg.delays = { NodePublishVolume: 60_000 };
    });
    let p = await c.start();
    await waitFor('NodeStage done', () =>
      c.calls().some((x) => x.method === 'NodeStageVolume' && x.code === 0),
    );
    await waitFor('NodePublish started', async () => (await volumeOf(p, 'web')) !== undefined);
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
