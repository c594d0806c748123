// Cluster mode for the benches: the project's test API server (in this
// process, spoken to by podvol through the real @kubernetes/client-node) with
// a node, a service account and the objects the pods reference.
import { addNode } from '../test/apiserver/node.ts';
import { startTestApiServer, type TestApiServer } from '../test/apiserver/server.ts';
import { must } from '../test/helpers/must.ts';
import { kubeApiAccessVolume, apiPod as podOn, type VolumeSpec } from '../test/helpers/pods.ts';
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
export function apiPod(name: string, volumes: VolumeSpec[]) {
  return podOn(
    name,
    NODE,
    {
      containers: [{ name: 'app', image: 'busybox', volumeMounts: mounts(volumes.map((v) => v.name)) }],
      volumes,
    },
    { app: 'bench' },
  );
}

/** The objects of pod `id`: configMap cfg-<id> and secret sec-<id> (its own: the worst case for per-object watches). */
export function createPodObjects(api: TestApiServer, id: string | number): void {
  createConfigMap(api, `cfg-${id}`);
  createSecret(api, `sec-${id}`);
}

/** The issue's API-load pod: pod `id`'s secret and configMap, and a service account token (kube-api-access). */
export function secretConfigMapTokenVolumes(id: string | number): VolumeSpec[] {
  return [
    { name: 'cfg', configMap: { name: `cfg-${id}`, defaultMode: 0o644 } },
    { name: 'sec', secret: { secretName: `sec-${id}`, defaultMode: 0o420 } },
    kubeApiAccessVolume(),
  ];
}

/** Deletes every pod at once (no grace period) and waits until podvol tore all `volumes` down. */
export async function deleteAllPods(api: TestApiServer, p: Podvol, volumes: number): Promise<number> {
  const done = waitLines(p, 'UnmountVolume.TearDown succeeded', volumes);
  const t0 = performance.now();
  for (const pod of api.store.list('pods', 'default')) {
    api.store.delete('pods', 'default', must(pod.metadata?.name, 'pod name'), { gracePeriodSeconds: 0 });
  }
  return (await done) - t0;
}
