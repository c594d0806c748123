import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/volumehost/kube/config.ts';
import { kubeEnv } from './env.ts';

describe('loadKubeConfig', () => {
  test('an explicit kubeconfig file wins and reaches the server', async (t) => {
    const { api, dir } = await kubeEnv(t);
    const path = await api.kubeconfigPath(dir);
    const kc = loadKubeConfig({ kubeconfig: path, env: { KUBECONFIG: '/nonexistent' } });
    assert.equal(kc.getCurrentCluster()?.server, api.url);
    assert.deepEqual((await kc.makeApiClient(CoreV1Api).listNode()).items, []);
  });

  test('KUBECONFIG is used when no file is given', async (t) => {
    const { api, dir } = await kubeEnv(t);
    const path = await api.kubeconfigPath(dir);
    const kc = loadKubeConfig({ env: { KUBECONFIG: path } });
    assert.equal(kc.getCurrentCluster()?.server, api.url);
  });

  test('in-cluster: the service account token and CA under the standard path', async (t) => {
    const { api, dir } = await kubeEnv(t);
    const sa = join(dir, 'var/run/secrets/kubernetes.io/serviceaccount');
    await mkdir(sa, { recursive: true });
    await writeFile(join(sa, 'token'), api.token);
    await writeFile(join(sa, 'ca.crt'), api.caCert);
    await writeFile(join(sa, 'namespace'), 'kube-system');
    const port = new URL(api.url).port;
    const before = [process.env.KUBERNETES_SERVICE_HOST, process.env.KUBERNETES_SERVICE_PORT];
    const kc = loadKubeConfig({
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port },
      inClusterPathPrefix: dir,
    });
    assert.deepEqual(
      [process.env.KUBERNETES_SERVICE_HOST, process.env.KUBERNETES_SERVICE_PORT],
      before,
      'process.env is left as it was',
    );
    assert.equal(kc.getCurrentCluster()?.server, `https://127.0.0.1:${port}`);
    assert.deepEqual((await kc.makeApiClient(CoreV1Api).listNode()).items, []);
  });

  test('in-cluster without a token file names the missing file', async (t) => {
    const { dir } = await kubeEnv(t);
    assert.throws(
      () =>
        loadKubeConfig({
          env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
          inClusterPathPrefix: dir,
        }),
      {
        message:
          /^in-cluster config: KUBERNETES_SERVICE_HOST is set but the service account token .*\/token does not exist/,
      },
    );
  });

  test('no configuration at all is an error, never a silent localhost:8080', () => {
    assert.throws(() => loadKubeConfig({ env: {} }), {
      message: /^no Kubernetes API configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod/,
    });
  });

  test('a missing or empty kubeconfig file is an error naming it', async (t) => {
    const { dir } = await kubeEnv(t);
    assert.throws(() => loadKubeConfig({ kubeconfig: join(dir, 'nope') }), {
      message: `--kubeconfig: kubeconfig file ${join(dir, 'nope')} does not exist`,
    });
    const empty = join(dir, 'empty');
    await writeFile(empty, 'apiVersion: v1\nkind: Config\n');
    assert.throws(() => loadKubeConfig({ kubeconfig: empty }), {
      message: `kubeconfig ${empty}: no current-context set`,
    });
  });
});
