// The secrets and configMaps of the node's pods, registered with the object
// caches by connectCluster's podsChanged: a pod that went keeps its objects
// while its volumes are not torn down yet (kubelet's SyncTerminatedPod
// unregisters only after WaitForUnmount), so a SetUp still running for it
// does not fail `object "ns"/"name" not registered`.
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { type Cluster, connectCluster } from '../../src/agent/cluster.ts';
import { recordingLogger } from '../helpers/logger.ts';
import { type KubeEnv, kubeEnv, waitFor } from '../volumehost/kube/env.ts';

const pod: V1Pod = {
  metadata: { uid: 'uid-1', namespace: 'ns', name: 'web' },
  spec: {
    containers: [],
    volumes: [
      { name: 'sec', secret: { secretName: 'creds' } },
      { name: 'cfg', configMap: { name: 'settings' } },
    ],
  },
};

/**
 * The test API server with the pod's objects, and connectCluster against it for `body`; the
 * cluster stops before the API server closes (kubeEnv's after hook runs first), or its watches
 * would retry into a closed server.
 */
async function withCluster(t: TestContext, body: (api: KubeEnv['api'], cluster: Cluster) => Promise<void>) {
  const { api, dir } = await kubeEnv(t);
  api.store.create('secrets', { metadata: { name: 'creds', namespace: 'ns' }, data: { k: 'dg==' } });
  api.store.create('configmaps', { metadata: { name: 'settings', namespace: 'ns' }, data: { a: '1' } });
  const cluster = await connectCluster({
    kubeconfig: await api.kubeconfigPath(dir),
    nodeName: 'n1',
    logger: recordingLogger(() => {}),
  });
  try {
    await body(api, cluster);
  } finally {
    await cluster.stop();
  }
}

test('a pod that went keeps its objects until its volumes are torn down', (t) => withCluster(t, wentAway));

/** The object once its first list is in (kubelet's 1 s wait for it can pass on a loaded machine). */
async function synced<T>(
  get: ((namespace: string, name: string) => Promise<T>) | undefined,
  name: string,
): Promise<T> {
  assert.ok(get);
  for (;;) {
    try {
      return await get('ns', name);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('failed to sync')) throw err;
    }
  }
}

async function wentAway(api: KubeEnv['api'], cluster: Cluster): Promise<void> {
  cluster.podsChanged([pod]);
  assert.deepEqual((await synced(cluster.backend.getSecret, 'creds'))?.data, { k: 'dg==' });
  assert.deepEqual((await synced(cluster.backend.getConfigMap, 'settings'))?.data, { a: '1' });
  // Open watches: the node's and the CSIDrivers' (started by connectCluster, on their own time) and the objects'.
  await waitFor(
    'the node, CSIDriver, secret and configMap watches',
    () => api.hooks.openWatches() === 4,
    30_000,
  );

  // Deleted from the API while a volume of it is still mounted (or a SetUp still runs).
  let volumesLeft = true;
  cluster.podsChanged([], () => volumesLeft);
  assert.deepEqual((await synced(cluster.backend.getSecret, 'creds'))?.data, { k: 'dg==' });
  assert.deepEqual((await synced(cluster.backend.getConfigMap, 'settings'))?.data, { a: '1' });

  // The last volume was torn down: the next call releases the objects and closes their watches.
  volumesLeft = false;
  cluster.podsChanged([], () => volumesLeft);
  await assert.rejects(cluster.backend.getSecret?.('ns', 'creds') ?? Promise.resolve(), {
    message: 'object "ns"/"creds" not registered',
  });
  await assert.rejects(cluster.backend.getConfigMap?.('ns', 'settings') ?? Promise.resolve(), {
    message: 'object "ns"/"settings" not registered',
  });
  await waitFor('the watches closed', () => api.hooks.openWatches() === 2, 30_000);
}

test('a pod still listed keeps its objects whatever inUse says', (t) =>
  withCluster(t, async (_api, cluster) => {
    cluster.podsChanged([pod], () => false);
    cluster.podsChanged([pod], () => false);
    assert.deepEqual((await synced(cluster.backend.getSecret, 'creds'))?.data, { k: 'dg==' });
  }));
