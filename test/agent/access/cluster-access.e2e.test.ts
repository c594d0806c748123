// `podvol run` in cluster mode on a non-loopback address: HTTPS with a
// generated certificate, callers checked with the test API server; and static
// pods that name API objects refused as the API server refuses such mirror pods.
import assert from 'node:assert/strict';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { startTestApiServer } from '../../apiserver/server.ts';
import { daemonDirs, startPodvol, waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

async function cluster(t: TestContext) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t);
  const kubeconfig = await api.kubeconfigPath(base);
  api.store.create('nodes', { metadata: { name: 'testnode' } });
  api.store.create('serviceaccounts', { metadata: { name: 'default', namespace: 'kube-system' } });
  api.store.create('secrets', {
    metadata: { name: 'cluster-admin-token', namespace: 'kube-system' },
    data: { token: Buffer.from('do-not-leak').toString('base64') },
  });
  return { api, base, kubeconfig, ...(await daemonDirs(base)) };
}

const staticPod = (name: string, volumes: object[]) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'kube-system' },
  spec: {
    containers: [
      {
        name: 'c',
        image: 'busybox',
        volumeMounts: volumes.map((v) => ({ name: (v as { name: string }).name, mountPath: '/v' })),
      },
    ],
    volumes,
  },
});

mountTest('cluster mode: a static pod naming a secret is refused with StaticPodAPIReference', async (t) => {
  const { api, kubeconfig, manifests, root } = await cluster(t);
  await writeFile(
    join(manifests, 'thief.yaml'),
    JSON.stringify(staticPod('thief', [{ name: 'loot', secret: { secretName: 'cluster-admin-token' } }])),
  );
  await writeFile(
    join(manifests, 'fine.yaml'),
    JSON.stringify(staticPod('fine', [{ name: 'scratch', emptyDir: {} }])),
  );
  const p = await startPodvol({ rootDir: root, manifests, extra: ['--kubeconfig', kubeconfig] });
  t.after(() => p.stop());
  const status = await waitFor(
    'the refusal in /status',
    async () => {
      const s = await p.status();
      const fine = s.pods.find((x) => x.name === 'fine-testnode');
      return fine?.volumes.every((v) => v.state === 'mounted') && s.errors.length > 0 ? s : undefined;
    },
    90_000,
  );
  const refusal = status.errors.find((e) => e.reason === 'StaticPodAPIReference');
  assert.ok(refusal, JSON.stringify(status.errors));
  assert.match(refusal.message, /node "testnode" can not create pods that reference secrets/);
  assert.match(refusal.message, /volume "loot": secret "cluster-admin-token"/);
  assert.equal(
    status.pods.find((x) => x.name === 'thief-testnode'),
    undefined,
    'the refused pod is not served',
  );
  assert.equal(
    api.hooks.requests.filter((r) => r.resource === 'secrets').length,
    0,
    'podvol never asked for the secret',
  );
  const dirs = await readdir(join(root, 'pods'));
  assert.equal(dirs.length, 1, 'only the good pod has a directory');
});

mountTest(
  'standalone mode still serves static pods that name secrets (there is nothing to fetch them from)',
  async (t) => {
    const { manifests, root } = await cluster(t);
    await writeFile(
      join(manifests, 'app.yaml'),
      JSON.stringify(staticPod('app', [{ name: 's', secret: { secretName: 'x', optional: true } }])),
    );
    const p = await startPodvol({ rootDir: root, manifests });
    t.after(() => p.stop());
    const s = await waitFor(
      'app in /status',
      async () => {
        const doc = await p.status();
        return doc.pods.find((x) => x.name === 'app-testnode') ? doc : undefined;
      },
      90_000,
    );
    assert.ok(!s.errors.some((e) => e.reason === 'StaticPodAPIReference'));
  },
);

mountTest(
  'cluster mode on 0.0.0.0: HTTPS, 401 without a token, 403 without nodes/proxy, 200 with it',
  async (t) => {
    const { api, kubeconfig, root } = await cluster(t);
    api.hooks.addUser('ops-token', { username: 'ops' });
    api.hooks.addUser('other-token', { username: 'other' });
    api.store.create('clusterroles.rbac.authorization.k8s.io', {
      metadata: { name: 'node-proxy' },
      rules: [{ apiGroups: [''], resources: ['nodes/proxy'], verbs: ['get'] }],
    } as never);
    api.store.create('clusterrolebindings.rbac.authorization.k8s.io', {
      metadata: { name: 'ops-node-proxy' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'node-proxy' },
      subjects: [{ kind: 'User', name: 'ops' }],
    } as never);
    const p = await startPodvol({ rootDir: root, secure: true, extra: ['--kubeconfig', kubeconfig] });
    t.after(() => p.stop());
    assert.equal((await p.get('/healthz')).status, 200);
    assert.equal((await p.get('/status')).status, 401);
    assert.equal((await p.get('/status', 'nope')).status, 401);
    assert.equal((await p.get('/status', 'other-token')).status, 403);
    assert.equal((await p.get('/metrics', 'other-token')).status, 403);
    const ok = await p.get('/status', 'ops-token');
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.body).node, 'testnode');
    assert.ok(
      p.logLines().some((l) => String(l.msg).includes('self-signed certificate')),
      'the generated certificate is announced with a warning',
    );
  },
);
