// podvol run in cluster mode against the test API server, through the real
// @kubernetes/client-node, with real mounts in the test's mount namespace.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { callRuntime } from '../../src/agent/runtime/client.ts';
import { addNode } from '../apiserver/node.ts';
import { startTestApiServer } from '../apiserver/server.ts';
import { type PodvolProcess, runtimeSocketOf, startPodvol, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { at, must } from '../helpers/must.ts';
import { apiPod, kubeApiAccessVolume, uidOf } from '../helpers/pods.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

// Pods as the API server returns them: already defaulted (defaultMode, expirationSeconds).
function webPod(name: string, secretName = 'creds') {
  return apiPod(name, 'testnode', {
    containers: [
      {
        name: 'app',
        image: 'busybox',
        volumeMounts: ['cfg', 'sec', 'kube-api-access'].map((v) => ({ name: v, mountPath: `/${v}` })),
      },
    ],
    volumes: [
      { name: 'cfg', configMap: { name: 'app-config', defaultMode: 0o644 } },
      { name: 'sec', secret: { secretName, defaultMode: 0o400 } },
      kubeApiAccessVolume(),
    ],
  });
}

async function cluster(t: TestContext) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t);
  const kubeconfig = await api.kubeconfigPath(base);
  const s = api.store;
  addNode(s, 'testnode');
  s.create('configmaps', {
    metadata: { name: 'app-config', namespace: 'default' },
    data: { 'app.conf': 'v1' },
  });
  s.create('secrets', {
    metadata: { name: 'creds', namespace: 'default' },
    data: { password: b64('s3cret-bytes') },
  });
  s.create('csidrivers', { metadata: { name: 'example.csi.podvol.dev' }, spec: {} });
  const root = join(base, 'root');
  return { api, base, root, kubeconfig };
}

const podReady = (name: string) => async (p: PodvolProcess) => {
  const entry = (await p.status()).pods.find((x) => x.name === name);
  return entry && entry.volumes.length === 3 && entry.volumes.every((v) => v.state === 'mounted')
    ? entry
    : undefined;
};

mountTest(
  'cluster mode: token, configMap and secret files appear, refresh, survive watch faults, and tear down',
  async (t) => {
    const { api, root, kubeconfig } = await cluster(t);
    const pod = api.store.create('pods', webPod('web'));
    const uid = uidOf(pod);
    const p = await startPodvol({ rootDir: root, extra: ['--kubeconfig', kubeconfig] });
    t.after(() => p.stop());
    await waitFor('web mounted', () => podReady('web')(p));
    await waitFor('ready', async () => (await p.get('/readyz')).status === 200);

    const vols = join(root, 'pods', uid, 'volumes');
    const cfg = join(vols, 'kubernetes.io~configmap/cfg');
    const sec = join(vols, 'kubernetes.io~secret/sec');
    const proj = join(vols, 'kubernetes.io~projected/kube-api-access');
    assert.equal(await readFile(join(cfg, 'app.conf'), 'utf8'), 'v1');
    assert.equal((await stat(join(cfg, 'app.conf'))).mode & 0o777, 0o644);
    assert.equal(await readFile(join(sec, 'password'), 'utf8'), 's3cret-bytes');
    assert.equal((await stat(join(sec, 'password'))).mode & 0o777, 0o400);
    const issued = api.hooks.issuedTokens.at(-1);
    assert.ok(issued, 'a TokenRequest was made');
    assert.deepEqual(issued.boundObjectRef, { apiVersion: 'v1', kind: 'Pod', name: 'web', uid });
    assert.equal(issued.expirationSeconds, 3607);
    assert.equal(await readFile(join(proj, 'token'), 'utf8'), issued.token);
    assert.equal(await readFile(join(proj, 'namespace'), 'utf8'), 'default');

    const mounts = await mountsBelow(join(root, 'pods', uid));
    const fsOf = (dir: string) => mounts.find((m) => m.mountPoint === dir)?.fsType;
    assert.equal(fsOf(sec), 'tmpfs', 'secret bytes live on tmpfs');
    assert.equal(fsOf(proj), 'tmpfs', 'tokens live on tmpfs');
    assert.equal(fsOf(cfg), undefined, 'configMaps are disk-backed, as in kubelet');
    assert.ok(
      !p.output().includes('s3cret-bytes') && !p.output().includes(issued.token),
      'no secret or token in the logs',
    );

    // A configMap update reaches the file, swapped atomically through ..data.
    const before = await readFile(join(cfg, '..data', 'app.conf'), 'utf8');
    const cm = api.store.mustGet('configmaps', 'default', 'app-config');
    const changedAt = Date.now();
    api.store.update('configmaps', { ...cm, data: { 'app.conf': 'v2' } });
    await waitFor(
      'configMap v2 on disk',
      async () => (await readFile(join(cfg, 'app.conf'), 'utf8')) === 'v2',
      5000,
    );
    t.diagnostic(`configMap change visible after ${Date.now() - changedAt} ms`);
    assert.equal(before, 'v1');

    // 410 Gone and dropped connections: relist and reconnect, nothing unmounted.
    const tableBefore = await mountsBelow(root);
    api.hooks.compact({ expireWatches: true });
    api.hooks.dropWatches();
    await waitFor('watches reopened', () => api.hooks.openWatches() >= 3);
    const relists = api.hooks.requests.filter((r) => r.resource === 'pods' && r.verb === 'list');
    assert.ok(relists.length >= 2, 'pods were listed again after 410');
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await mountsBelow(root), tableBefore, 'no volume was unmounted or remounted');
    assert.ok(!p.logLines().some((l) => l.msg === 'UnmountVolume.TearDown succeeded'));

    // A runtime took the pod's mounts, so its volumes outlive the deletion until the grace period ends.
    const handed = await callRuntime(
      runtimeSocketOf(root),
      'GET',
      `/v1/pods/${uid}/containers/app/mounts`,
      30_000,
    );
    assert.equal(handed.status, 200);
    // The pod goes away: everything is torn down and its directory removed.
    api.store.delete('pods', 'default', 'web', { gracePeriodSeconds: 3 });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(
      (await mountsBelow(join(root, 'pods', uid))).length,
      2,
      'nothing is unmounted during the grace period',
    );
    await waitGone('pod dir removed', join(root, 'pods', uid));
    assert.deepEqual(await mountsBelow(root), []);
  },
);

mountTest(
  'cluster mode: a failing volume posts a FailedMount Event and other pods are unaffected',
  async (t) => {
    const { api, root, kubeconfig } = await cluster(t);
    api.store.create('pods', webPod('good'));
    api.store.create('pods', webPod('broken', 'no-such-secret'));
    const p = await startPodvol({ rootDir: root, extra: ['--kubeconfig', kubeconfig] });
    t.after(() => p.stop());
    await waitFor('good mounted', () => podReady('good')(p));
    const sec = await waitFor('broken secret volume failed', async () => {
      const entry = (await p.status()).pods.find((x) => x.name === 'broken');
      const v = entry?.volumes.find((x) => x.name === 'sec');
      return v?.state === 'failed' ? v : undefined;
    });
    assert.equal(sec.reason, 'SecretNotFound');
    assert.equal(sec.message, 'secret "no-such-secret" not found');
    const event = await waitFor('FailedMount event', () =>
      api.store.list('events', 'default').find((e) => (e as { reason?: string }).reason === 'FailedMount'),
    );
    const ev = event as unknown as {
      message: string;
      involvedObject: { kind: string; name: string };
      source: { component: string; host: string };
    };
    assert.equal(ev.message, 'MountVolume.SetUp failed for volume "sec" : secret "no-such-secret" not found');
    assert.equal(ev.involvedObject.kind, 'Pod');
    assert.equal(ev.involvedObject.name, 'broken');
    assert.deepEqual(ev.source, { component: 'podvol', host: 'testnode' });

    // The secret appears: the volume recovers without a restart.
    api.store.create('secrets', {
      metadata: { name: 'no-such-secret', namespace: 'default' },
      data: { password: b64('late') },
    });
    await waitFor('broken recovers', () => podReady('broken')(p), 10_000);
  },
);

mountTest('cluster mode: a token near expiry is refreshed in the projected volume', async (t) => {
  const api = await startTestApiServer({ maxTokenExpirationSeconds: 12 });
  t.after(() => api.close());
  const base = await tempDir(t);
  const kubeconfig = await api.kubeconfigPath(base);
  api.store.create('nodes', {
    metadata: { name: 'testnode' },
    status: { allocatable: { cpu: '2', memory: '4Gi' } },
  });
  api.store.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
  const pod = api.store.create('pods', {
    metadata: { name: 'short', namespace: 'default' },
    spec: {
      nodeName: 'testnode',
      serviceAccountName: 'default',
      containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'tok', mountPath: '/tok' }] }],
      volumes: [
        {
          name: 'tok',
          projected: {
            defaultMode: 0o644,
            sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 600 } }],
          },
        },
      ],
    },
  });
  const file = join(base, 'root', 'pods', uidOf(pod), 'volumes/kubernetes.io~projected/tok/token');
  const p = await startPodvol({
    rootDir: join(base, 'root'),
    extra: ['--kubeconfig', kubeconfig, '--sync-frequency', '1s'],
  });
  t.after(() => p.stop());
  const first = await waitFor(
    'first token on disk',
    async () => (await readFile(file, 'utf8').catch(() => '')) || undefined,
  );
  // The server caps the lifetime at 12 s; 80 % of it (minus up to 10 s of jitter) passes within ~10 s.
  const second = await waitFor(
    'refreshed token on disk',
    async () => {
      const now = await readFile(file, 'utf8');
      return now !== first ? now : undefined;
    },
    20_000,
  );
  assert.equal(second, api.hooks.issuedTokens.at(-1)?.token);
  assert.ok(api.hooks.issuedTokens.length >= 2);
  assert.equal(at(at((await p.status()).pods, 0).volumes, 0).state, 'mounted');
});

mountTest(
  'cluster mode faults: API down at start, forbidden tokens, a 1 MiB configMap, an unsafe key',
  async (t) => {
    const { api, root, kubeconfig } = await cluster(t);
    const big = 'x'.repeat(1024 * 1024 - 64);
    api.store.create('configmaps', {
      metadata: { name: 'big', namespace: 'default' },
      data: { 'big.txt': big },
    });
    api.store.create('configmaps', {
      metadata: { name: 'sneaky', namespace: 'default' },
      data: { '..data': 'overwrite the swap link' },
    });
    const mk = (name: string, volumes: unknown[]) =>
      api.store.create('pods', {
        metadata: { name, namespace: 'default' },
        spec: {
          nodeName: 'testnode',
          serviceAccountName: 'default',
          containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'v', mountPath: '/v' }] }],
          volumes,
        },
      });
    mk('large', [{ name: 'v', configMap: { name: 'big', defaultMode: 0o644 } }]);
    mk('unsafe', [{ name: 'v', configMap: { name: 'sneaky', defaultMode: 0o644 } }]);
    mk('tokenless', [
      {
        name: 'v',
        projected: {
          defaultMode: 0o644,
          sources: [{ serviceAccountToken: { path: 't', expirationSeconds: 3600 } }],
        },
      },
    ]);
    api.hooks.forbid({ verb: 'create', resource: 'serviceaccounts', subresource: 'token' });

    await api.hooks.down();
    const p = await startPodvol({ rootDir: root, extra: ['--kubeconfig', kubeconfig] });
    t.after(() => p.stop());
    await new Promise((r) => setTimeout(r, 500));
    const notReady = await p.get('/readyz');
    assert.equal(notReady.status, 503, 'not ready while the API server is down');
    assert.match(notReady.body, /pod source api has not synced/);
    assert.equal((await p.get('/healthz')).status, 200, 'alive all the same');
    await api.hooks.up();
    await waitFor(
      'ready after the API server came up',
      async () => (await p.get('/readyz')).status === 200,
      20_000,
    );

    const state = (name: string) => async () => {
      const v = (await p.status()).pods.find((x) => x.name === name)?.volumes[0];
      return v && v.state !== 'pending' ? v : undefined;
    };
    const large = await waitFor('large settled', state('large'));
    assert.equal(large.state, 'mounted');
    const uid = must((await p.status()).pods.find((x) => x.name === 'large')?.uid, 'the uid of large');
    assert.equal(
      (await readFile(join(root, 'pods', uid, 'volumes/kubernetes.io~configmap/v/big.txt'), 'utf8')).length,
      big.length,
    );

    const unsafe = await waitFor('unsafe settled', state('unsafe'));
    assert.equal(unsafe.state, 'failed');
    assert.equal(unsafe.reason, 'InvalidPath');
    assert.match(unsafe.message, /\.\.data/);

    const tokenless = await waitFor('tokenless settled', state('tokenless'));
    assert.equal(tokenless.state, 'failed');
    assert.equal(tokenless.reason, 'TokenRequestForbidden');
    assert.match(tokenless.message, /forbidden/);
    assert.equal(p.proc.exitCode, null, 'podvol is still running');
  },
);
