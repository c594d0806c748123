// The CSI end-to-end scenarios' shared setup (test/agent/csi/*.e2e.test.ts):
// podvol run in cluster mode against the test API server, the test CSI driver
// (real gRPC, real bind mounts) registered through the test registrar in
// <root>/plugins_registry, exactly as a CSI node plugin DaemonSet with
// node-driver-registrar would be deployed next to podvol. The API objects are
// read and written through the typed store (test/apiserver/typed-store.ts).
import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type {
  V1CSIDriverSpec,
  V1PersistentVolumeClaimStatus,
  V1Pod,
  V1PodSpec,
} from '@kubernetes/client-node';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { addNode } from '../../apiserver/node.ts';
import { startTestApiServer } from '../../apiserver/server.ts';
import { typedStore } from '../../apiserver/typed-store.ts';
import { type DriverConfig, readCalls, startTestDriver, writeDriverConfig } from '../../csi/driver.ts';
import { startTestRegistrar } from '../../csi/registrar.ts';
import { type PodvolProcess, startPodvol, volumeOf, waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

export const DRIVER = 'test.csi.podvol.io';

export interface Options {
  driver?: Partial<DriverConfig>;
  /** The CSIDriver object's spec; null for no object at all. */
  csiDriver?: Partial<V1CSIDriverSpec> | null;
}

export async function csiCluster(t: TestContext, o: Options = {}) {
  // The driver's name: the test driver's own, or one it stands in for (a migrated in-tree plugin's).
  const name = o.driver?.name ?? DRIVER;
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t, 'pv-csi-');
  const kubeconfig = await api.kubeconfigPath(base);
  const store = typedStore(api.store);
  addNode(api.store, 'testnode');
  if (o.csiDriver !== null) {
    store.create('csidrivers.storage.k8s.io', {
      metadata: { name },
      spec: { attachRequired: false, ...(o.csiDriver ?? {}) },
    });
  }
  const root = join(base, 'root');
  const stateDir = join(base, 'driver');
  writeDriverConfig(stateDir, {
    name,
    nodeID: 'csi-node-1',
    maxVolumesPerNode: 16,
    topology: { 'topology.test.csi/zone': 'zone-a' },
    capabilities: ['STAGE_UNSTAGE_VOLUME'],
    ...o.driver,
  });
  // The node plugin's DaemonSet: its socket under podvol's plugins dir, the registrar in plugins_registry.
  const pluginSocketDir = join(root, 'plugins', name);
  await mkdir(pluginSocketDir, { recursive: true });
  await mkdir(join(root, 'plugins_registry'), { recursive: true });
  const driver = await startTestDriver(join(pluginSocketDir, 'csi.sock'), stateDir);
  t.after(() => driver.stop());
  const registrar = await startTestRegistrar({
    registrationDir: join(root, 'plugins_registry'),
    driverName: name,
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
  return { api, store, base, root, stateDir, driver, registrar, start, calls: () => readCalls(stateDir) };
}

export type Cluster = Awaited<ReturnType<typeof csiCluster>>;

/** Changes the CSIDriver object's spec, then gives podvol's watch half a second to see it. */
export async function updateDriverSpec(c: Cluster, spec: Partial<V1CSIDriverSpec>): Promise<void> {
  const drv = c.store.mustGet('csidrivers.storage.k8s.io', undefined, DRIVER);
  c.store.update('csidrivers.storage.k8s.io', { ...drv, spec: { ...drv.spec, ...spec } });
  await new Promise((r) => setTimeout(r, 500));
}

/** A bound claim: PVC + PV with a csi source. */
export function createClaim(
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
  const claim = c.store.create('persistentvolumeclaims', {
    metadata: { name, namespace: 'default' },
    spec: {
      accessModes: pv.accessModes ?? ['ReadWriteOnce'],
      volumeName: pvName,
      resources: { requests: { storage: '1Gi' } },
    },
    status: { phase: 'Bound' },
  });
  c.store.create('persistentvolumes', {
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

/** The test driver's volume `handle` as kubelet names it in volumesInUse and volumesAttached. */
export const uniqueNameOf = (handle: string) => `kubernetes.io/csi/${DRIVER}^${handle}`;

/** The node's volumesInUse as podvol last reported it. */
export const volumesInUse = (c: Cluster): string[] =>
  c.store.mustGet('nodes', undefined, 'testnode').status?.volumesInUse ?? [];

/** Where podvol stages the volume `handle` of the test driver (kubelet's globalmount). */
export const globalmountOf = (c: Cluster, handle: string) =>
  join(c.root, 'plugins', 'kubernetes.io', 'csi', DRIVER, sha256Hex(handle), 'globalmount');

export function claimPod(c: Cluster, name: string, claim: string, extra: Partial<V1PodSpec> = {}): V1Pod {
  return c.store.create('pods', {
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

/** A pod with an inline CSI volume `scratch` of the test driver. */
export function inlinePod(c: Cluster, name: string, extra: Partial<V1PodSpec> = {}): V1Pod {
  return c.store.create('pods', {
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

/** The volume's /status entry once it is mounted; the last entry seen in the error otherwise. */
export async function mounted(p: PodvolProcess, pod: string, volume = 'data') {
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

export const deletePod = (c: Cluster, name: string) =>
  c.store.delete('pods', 'default', name, { gracePeriodSeconds: 0 });

/** The driver's Node* calls other than the capability and info probes, in order. */
export const methods = (c: Cluster) =>
  c
    .calls()
    .filter((x) => x.method.startsWith('Node') && !['NodeGetCapabilities', 'NodeGetInfo'].includes(x.method));

/** The messages of the pod's Warning FailedMount Events. */
export function failedMounts(c: Cluster, pod: string): string[] {
  return c.store
    .list('events', 'default')
    .filter((e) => e.reason === 'FailedMount' && e.involvedObject?.name === pod)
    .map((e) => e.message ?? '');
}

/** The attach/detach controller and external-attacher, done: a VolumeAttachment attached and the node's volumesAttached. */
export function attach(c: Cluster, handles: string[]): void {
  for (const handle of handles) {
    const va = c.store.create('volumeattachments.storage.k8s.io', {
      metadata: { name: `csi-${sha256Hex(`${handle}${DRIVER}testnode`)}` },
      spec: { attacher: DRIVER, nodeName: 'testnode', source: { persistentVolumeName: `pv-${handle}` } },
    });
    c.store.update(
      'volumeattachments.storage.k8s.io',
      { ...va, status: { attached: true, attachmentMetadata: {} } },
      { subresource: 'status' },
    );
  }
  const n = c.store.mustGet('nodes', undefined, 'testnode');
  c.store.update(
    'nodes',
    {
      ...n,
      status: {
        ...n.status,
        volumesAttached: handles.map((h) => ({ name: uniqueNameOf(h), devicePath: '' })),
      },
    },
    { subresource: 'status' },
  );
}

/**
 * What the external-resizer leaves after ControllerExpandVolume with
 * node_expansion_required: the PV at `to`, the claim still at `from` and
 * NodeResizePending (with `status` added).
 */
export function nodeExpansionPending(
  c: Cluster,
  pvName: string,
  claimName: string,
  from: string,
  to: string,
  status: V1PersistentVolumeClaimStatus = {},
): void {
  const pv = c.store.mustGet('persistentvolumes', undefined, pvName);
  c.store.update('persistentvolumes', {
    ...pv,
    spec: { ...pv.spec, capacity: { storage: to } },
  });
  c.store.update(
    'persistentvolumeclaims',
    {
      ...c.store.mustGet('persistentvolumeclaims', 'default', claimName),
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

/** CAP_SYS_RESOURCE (bit 24 of CapEff): what resize2fs needs to grow a mounted ext4. */
export function canResizeMountedExt4(): boolean {
  const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
  return (BigInt(`0x${eff}`) & (1n << 24n)) !== 0n;
}

/** For debugging: CSI_ONLY="a|b" runs only the scenarios whose names contain a or b (CI leaves it unset). */
export function csiTest(name: string, fn: (t: TestContext) => Promise<void>): void {
  const only = process.env.CSI_ONLY;
  if (!only || only.split('|').some((x) => name.includes(x))) mountTest(name, fn);
}
