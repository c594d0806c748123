// Cluster mode for the benches: the project's test API server (in this
// process, spoken to by podvol through the real @kubernetes/client-node) with
// a node, a service account and the objects the pods reference.
import { addNode } from '../test/apiserver/node.ts';
import { startTestApiServer, type TestApiServer } from '../test/apiserver/server.ts';
import { type Podvol, waitLines } from './lib.ts';

export const NODE = 'benchnode';
const b64 = (s: string) => Buffer.from(s).toString('base64');

export async function startCluster(dir: string): Promise<{ api: TestApiServer; kubeconfig: string }> {
  const api = await startTestApiServer();
  addNode(api.store, NODE, { cpu: '2', memory: '16Gi' });
  return { api, kubeconfig: await api.kubeconfigPath(dir) };
}

export function createConfigMap(api: TestApiServer, name: string, value = 'v0'): void {
  api.store.create('configmaps', { metadata: { name, namespace: 'default' }, data: { 'app.conf': value } });
}

export function createSecret(api: TestApiServer, name: string): void {
  api.store.create('secrets', {
    metadata: { name, namespace: 'default' },
    data: { password: b64(`pw-${name}`) },
  });
}

const mounts = (names: string[]) => names.map((v) => ({ name: v, mountPath: `/${v}` }));

/** A pod as the API server returns it (defaulted), bound to the bench node. */
export function apiPod(name: string, volumes: unknown[]) {
  return {
    metadata: { name, namespace: 'default', labels: { app: 'bench' } },
    spec: {
      nodeName: NODE,
      serviceAccountName: 'default',
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: mounts(volumes.map((v) => (v as { name: string }).name)),
        },
      ],
      volumes,
    },
    status: { phase: 'Running' },
  };
}

/** The API-load pod: a secret, a configMap and a service account token (kube-api-access). */
export function secretConfigMapTokenVolumes(configMap: string, secret: string): unknown[] {
  return [
    { name: 'cfg', configMap: { name: configMap, defaultMode: 0o644 } },
    { name: 'sec', secret: { secretName: secret, defaultMode: 0o420 } },
    {
      name: 'kube-api-access',
      projected: {
        defaultMode: 0o644,
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
          { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
        ],
      },
    },
  ];
}

/** Deletes every pod at once (no grace period) and waits until podvol tore all `volumes` down. */
export async function deleteAllPods(api: TestApiServer, p: Podvol, volumes: number): Promise<number> {
  const done = waitLines(p, 'UnmountVolume.TearDown succeeded', volumes);
  const t0 = performance.now();
  for (const pod of api.store.list('pods', 'default')) {
    api.store.delete('pods', 'default', pod.metadata?.name as string, { gracePeriodSeconds: 0 });
  }
  return (await done) - t0;
}
