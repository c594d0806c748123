// Plain API requests share keep-alive connections; every watch keeps its own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CoreV1Api, Watch } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/volumehost/kube/config.ts';
import { PooledKubeConfig } from '../../../src/volumehost/kube/pooled-config.ts';
import { kubeEnv, waitFor } from './env.ts';

async function pooled(t: Parameters<typeof kubeEnv>[0]) {
  const { api, dir } = await kubeEnv(t);
  const kc = loadKubeConfig({ kubeconfig: await api.kubeconfigPath(dir) });
  assert.ok(kc instanceof PooledKubeConfig);
  // Closed before the API server (kubeEnv's after hook runs first and would wait for the idle sockets).
  return { api, kc, core: kc.makeApiClient(CoreV1Api) };
}

describe('pooled API connections', () => {
  test('lists and TokenRequests reuse one connection', async (t) => {
    const { api, kc, core } = await pooled(t);
    api.store.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
    try {
      for (let i = 0; i < 10; i++) await core.listNamespacedSecret({ namespace: 'default' });
      await core.createNamespacedServiceAccountToken({
        name: 'default',
        namespace: 'default',
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      assert.equal(api.hooks.requests.length, 11);
      // undici hands a connection back to the pool a moment after its response was read, so the
      // request right after the first may open a second one; without the pool there would be 11.
      assert.ok(api.hooks.connections() <= 2, `${api.hooks.connections()} connections for 11 requests`);
    } finally {
      await kc.close();
    }
  });

  test('every watch has a connection of its own, beside the pool', async (t) => {
    const { api, kc, core } = await pooled(t);
    const controllers: AbortController[] = [];
    try {
      await core.listNamespacedConfigMap({ namespace: 'default' });
      const watch = new Watch(kc);
      for (const name of ['a', 'b']) {
        controllers.push(
          await watch.watch(
            '/api/v1/namespaces/default/configmaps',
            { fieldSelector: `metadata.name=${name}` },
            () => {},
            () => {},
          ),
        );
      }
      await waitFor('both watches open', () => api.hooks.openWatches() === 2, 30_000);
      await core.listNamespacedConfigMap({ namespace: 'default' });
      assert.equal(api.hooks.connections(), 3);
      // One connector for all of them: the watches' handshakes resume the pool's TLS session.
      assert.equal(api.hooks.resumedConnections(), 2);
    } finally {
      for (const c of controllers) c.abort();
      await kc.close();
    }
  });

  test('a connection the server closed is not reused: the next request opens a new one', async (t) => {
    const { api, kc, core } = await pooled(t);
    try {
      await core.listNamespacedSecret({ namespace: 'default' });
      await api.hooks.down();
      await api.hooks.up();
      assert.deepEqual((await core.listNamespacedSecret({ namespace: 'default' })).items, []);
      assert.equal(api.hooks.connections(), 2);
    } finally {
      await kc.close();
    }
  });
});
