// The test API server, exercised only through the real @kubernetes/client-node.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import {
  type ApiException,
  CertificatesV1beta1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  StorageV1Api,
  setHeaderOptions,
  type V1Pod,
  Watch,
} from '@kubernetes/client-node';
import { at, must } from '../helpers/must.ts';
import { startTestApiServer, type TestApiServer, type TestApiServerOptions } from './server.ts';

interface Env {
  api: TestApiServer;
  kc: KubeConfig;
  core: CoreV1Api;
}

async function setup(t: TestContext, opts: TestApiServerOptions = {}): Promise<Env> {
  const api = await startTestApiServer(opts);
  const dir = await mkdtemp(join(tmpdir(), 'podvol-apiserver-'));
  t.after(async () => {
    await api.close();
    await rm(dir, { recursive: true, force: true });
  });
  const kc = new KubeConfig();
  kc.loadFromFile(await api.kubeconfigPath(dir));
  return { api, kc, core: kc.makeApiClient(CoreV1Api) };
}

function pod(ns: string, name: string, nodeName?: string): V1Pod {
  return {
    metadata: { name, namespace: ns },
    spec: { nodeName, containers: [{ name: 'c', image: 'busybox' }] },
  };
}

/** A plain HTTPS GET with the server's CA and token, for paths client-node has no method for. */
function raw(
  api: TestApiServer,
  path: string,
  token = api.token,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${api.url}${path}`,
      { ca: api.caCert, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function rejects(p: Promise<unknown>): Promise<ApiException<string>> {
  try {
    await p;
  } catch (e) {
    return e as ApiException<string>;
  }
  assert.fail('expected the call to fail');
}

interface WatchEvent {
  type: string;
  object: { metadata?: { name?: string; resourceVersion?: string }; code?: number; reason?: string };
}

/** Watch until `until` is true for the collected events (or the stream ends). */
function collect(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean>,
  until: (events: WatchEvent[]) => boolean,
): Promise<{ events: WatchEvent[]; err: unknown }> {
  const events: WatchEvent[] = [];
  return new Promise((resolve) => {
    let ctl: AbortController | undefined;
    let finished = false;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      ctl?.abort();
      resolve({ events, err });
    };
    void new Watch(kc)
      .watch(
        path,
        query,
        (type, object) => {
          events.push({ type, object });
          if (until(events)) finish(null);
        },
        (err) => finish(err),
      )
      .then((c) => {
        ctl = c;
        if (finished) c.abort();
      });
  });
}

describe('test API server', () => {
  test('pods: create, get, list with a resourceVersion, update, delete', async (t) => {
    const { core } = await setup(t);
    const created = await core.createNamespacedPod({ namespace: 'ns1', body: pod('ns1', 'a', 'node1') });
    assert.equal(created.metadata?.namespace, 'ns1');
    assert.match(created.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
    assert.ok(Number(created.metadata?.resourceVersion) > 0);

    const got = await core.readNamespacedPod({ namespace: 'ns1', name: 'a' });
    assert.equal(got.metadata?.uid, created.metadata?.uid);

    await core.createNamespacedPod({ namespace: 'ns2', body: pod('ns2', 'b', 'node2') });
    const all = await core.listPodForAllNamespaces();
    assert.deepEqual(
      all.items.map((p) => p.metadata?.name),
      ['a', 'b'],
    );
    assert.ok(Number(all.metadata?.resourceVersion) >= Number(created.metadata?.resourceVersion));
    const ns1 = await core.listNamespacedPod({ namespace: 'ns1' });
    assert.deepEqual(
      ns1.items.map((p) => p.metadata?.name),
      ['a'],
    );

    must(got.metadata, 'metadata').labels = { app: 'x' };
    const updated = await core.replaceNamespacedPod({ namespace: 'ns1', name: 'a', body: got });
    assert.equal(updated.metadata?.labels?.app, 'x');
    assert.ok(Number(updated.metadata?.resourceVersion) > Number(created.metadata?.resourceVersion));

    // A stale resourceVersion is a 409 Conflict.
    const stale = await rejects(core.replaceNamespacedPod({ namespace: 'ns1', name: 'a', body: got }));
    assert.equal(stale.code, 409);

    // Pods bound to a node are deleted gracefully unless the grace period is 0.
    const graceful = await core.deleteNamespacedPod({ namespace: 'ns1', name: 'a' });
    assert.ok(graceful.metadata?.deletionTimestamp);
    await core.readNamespacedPod({ namespace: 'ns1', name: 'a' });
    await core.deleteNamespacedPod({ namespace: 'ns1', name: 'a', gracePeriodSeconds: 0 });
    const gone = await rejects(core.readNamespacedPod({ namespace: 'ns1', name: 'a' }));
    assert.equal(gone.code, 404);
  });

  test('a posted pod is stored defaulted as the real API server would: modes, token expiry, service account', async (t) => {
    const { core } = await setup(t);
    const created = await core.createNamespacedPod({
      namespace: 'ns',
      body: {
        metadata: { name: 'p', namespace: 'ns' },
        spec: {
          nodeName: 'node1',
          containers: [{ name: 'c', image: 'busybox' }],
          volumes: [
            { name: 'cfg', configMap: { name: 'cm', items: [{ key: 'k', path: 'k' }] } },
            { name: 'sec', secret: { secretName: 's' } },
            {
              name: 'down',
              downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] },
            },
            { name: 'tok', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
            { name: 'scratch' },
          ],
        },
      },
    });
    const spec = must(created.spec, 'spec');
    const volume = (name: string) =>
      must(
        spec.volumes?.find((v) => v.name === name),
        name,
      );
    assert.equal(volume('cfg').configMap?.defaultMode, 0o644);
    // An item's mode stays unset: the volume's defaultMode applies to it.
    assert.equal(volume('cfg').configMap?.items?.[0]?.mode, undefined);
    assert.equal(volume('sec').secret?.defaultMode, 0o644);
    assert.equal(volume('down').downwardAPI?.defaultMode, 0o644);
    assert.equal(volume('down').downwardAPI?.items?.[0]?.fieldRef?.apiVersion, 'v1');
    assert.equal(volume('tok').projected?.defaultMode, 0o644);
    assert.equal(volume('tok').projected?.sources?.[0]?.serviceAccountToken?.expirationSeconds, 3600);
    assert.ok(volume('scratch').emptyDir);
    assert.equal(spec.serviceAccountName, 'default');
    assert.equal(spec.serviceAccount, 'default');
    assert.equal(spec.terminationGracePeriodSeconds, 30);
    // What the client sent explicitly is kept.
    const own = await core.createNamespacedPod({
      namespace: 'ns',
      body: {
        metadata: { name: 'q', namespace: 'ns' },
        spec: {
          serviceAccountName: 'app',
          containers: [{ name: 'c', image: 'busybox' }],
          volumes: [{ name: 'sec', secret: { secretName: 's', defaultMode: 0o400 } }],
        },
      },
    });
    assert.equal(own.spec?.volumes?.[0]?.secret?.defaultMode, 0o400);
    assert.equal(own.spec?.serviceAccountName, 'app');
  });

  test('errors are Status objects: 404 NotFound with details, 409 AlreadyExists', async (t) => {
    const { core } = await setup(t);
    const e = await rejects(core.readNamespacedSecret({ namespace: 'ns', name: 'missing' }));
    assert.equal(e.code, 404);
    const status = JSON.parse(e.body);
    assert.equal(status.kind, 'Status');
    assert.equal(status.reason, 'NotFound');
    assert.equal(status.message, 'secrets "missing" not found');
    assert.deepEqual(status.details, { name: 'missing', group: '', kind: 'secrets' });

    await core.createNamespacedConfigMap({ namespace: 'ns', body: { metadata: { name: 'c' } } });
    const dup = await rejects(
      core.createNamespacedConfigMap({ namespace: 'ns', body: { metadata: { name: 'c' } } }),
    );
    assert.equal(dup.code, 409);
    assert.equal(JSON.parse(dup.body).reason, 'AlreadyExists');
  });

  test('field selectors: spec.nodeName for pods, metadata.name for any kind, unknown labels are 400', async (t) => {
    const { core } = await setup(t);
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'p1', 'node1') });
    await core.createNamespacedPod({ namespace: 'b', body: pod('b', 'p2', 'node2') });
    await core.createNamespacedSecret({ namespace: 'a', body: { metadata: { name: 's1' } } });
    await core.createNamespacedSecret({ namespace: 'a', body: { metadata: { name: 's2' } } });
    const onNode1 = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node1' });
    assert.deepEqual(
      onNode1.items.map((p) => p.metadata?.name),
      ['p1'],
    );
    const s2 = await core.listNamespacedSecret({ namespace: 'a', fieldSelector: 'metadata.name=s2' });
    assert.deepEqual(
      s2.items.map((s) => s.metadata?.name),
      ['s2'],
    );
    const bad = await rejects(
      core.listNamespacedSecret({ namespace: 'a', fieldSelector: 'spec.nodeName=x' }),
    );
    assert.equal(bad.code, 400);
    assert.match(JSON.parse(bad.body).message, /field label not supported: spec.nodeName/);
  });

  test('nodes: create, get, update status; the main resource ignores status', async (t) => {
    const { core } = await setup(t);
    await core.createNode({ body: { metadata: { name: 'n1', labels: { zone: 'a' } } } });
    const n = await core.readNode({ name: 'n1' });
    n.status = { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] };
    const viaMain = await core.replaceNode({ name: 'n1', body: n });
    assert.equal(viaMain.status, undefined);
    viaMain.status = { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] };
    const viaStatus = await core.replaceNodeStatus({ name: 'n1', body: viaMain });
    assert.equal(viaStatus.status?.addresses?.[0]?.address, '10.0.0.1');
    assert.equal((await core.listNode()).items.length, 1);
  });

  test('watch: ADDED/MODIFIED/DELETED from a resourceVersion, selector transitions, bookmarks', async (t) => {
    const { api, kc, core } = await setup(t);
    const list = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node1' });
    const rv = must(list.metadata?.resourceVersion, 'resourceVersion');
    const watching = collect(
      kc,
      '/api/v1/pods',
      { fieldSelector: 'spec.nodeName=node1', resourceVersion: rv, allowWatchBookmarks: true },
      (evs) => evs.some((e) => e.type === 'BOOKMARK'),
    );
    await core.createNamespacedPod({ namespace: 'ns', body: pod('ns', 'mine', 'node1') });
    await core.createNamespacedPod({ namespace: 'ns', body: pod('ns', 'other', 'node2') });
    const p = await core.readNamespacedPod({ namespace: 'ns', name: 'mine' });
    must(p.metadata, 'metadata').labels = { v: '2' };
    await core.replaceNamespacedPod({ namespace: 'ns', name: 'mine', body: p });
    await core.deleteNamespacedPod({ namespace: 'ns', name: 'mine', gracePeriodSeconds: 0 });
    api.hooks.sendBookmarks();
    const { events } = await watching;
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.object.metadata?.name ?? ''}`),
      ['ADDED mine', 'MODIFIED mine', 'DELETED mine', 'BOOKMARK '],
    );
    const bookmarkRV = Number(at(events, 3).object.metadata?.resourceVersion);
    assert.equal(bookmarkRV, api.store.resourceVersion());
  });

  test('watch without a resourceVersion starts with ADDED for every existing object', async (t) => {
    const { kc, core } = await setup(t);
    await core.createNamespacedConfigMap({ namespace: 'ns', body: { metadata: { name: 'one' } } });
    await core.createNamespacedConfigMap({ namespace: 'ns', body: { metadata: { name: 'two' } } });
    const { events } = await collect(kc, '/api/v1/namespaces/ns/configmaps', {}, (evs) => evs.length === 2);
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.object.metadata?.name}`),
      ['ADDED one', 'ADDED two'],
    );
  });

  test('compaction: a too-old resourceVersion is 410 on list and an ERROR event on watch', async (t) => {
    const { api, kc, core } = await setup(t);
    const old = must(
      (await core.listNamespacedPod({ namespace: 'ns' })).metadata?.resourceVersion,
      'resourceVersion',
    );
    api.hooks.compact();
    const listErr = await rejects(core.listNamespacedPod({ namespace: 'ns', resourceVersion: old }));
    assert.equal(listErr.code, 410);
    assert.equal(JSON.parse(listErr.body).reason, 'Expired');
    const { events, err } = await collect(
      kc,
      '/api/v1/namespaces/ns/pods',
      { resourceVersion: old },
      () => false,
    );
    assert.equal(err, null);
    assert.equal(events.length, 1);
    assert.equal(at(events, 0).type, 'ERROR');
    assert.equal(at(events, 0).object.code, 410);
    assert.equal(at(events, 0).object.reason, 'Expired');
  });

  test('watch streams end after timeoutSeconds', async (t) => {
    const { kc } = await setup(t);
    const { events, err } = await collect(kc, '/api/v1/pods', { timeoutSeconds: 1 }, () => false);
    assert.equal(err, null);
    assert.deepEqual(events, []);
  });

  test('dropWatches closes open streams; down() refuses connections until up()', async (t) => {
    const { api, kc, core } = await setup(t);
    const watching = collect(kc, '/api/v1/pods', {}, () => false);
    while (api.hooks.openWatches() === 0) await new Promise((r) => setImmediate(r));
    api.hooks.dropWatches();
    await watching;
    assert.equal(api.hooks.openWatches(), 0);

    await api.hooks.down();
    const refused = (await rejects(core.listNode())) as unknown as Error & { cause?: { code?: string } };
    assert.equal(refused.cause?.code, 'ECONNREFUSED');
    await api.hooks.up();
    assert.deepEqual((await core.listNode()).items, []);
  });

  test('auth: 401 without the bearer token, 403 for a forbidden verb/resource', async (t) => {
    const { api, core } = await setup(t);
    const other = new KubeConfig();
    other.loadFromOptions({
      clusters: [{ name: 'c', server: api.url, caData: Buffer.from(api.caCert).toString('base64') }],
      users: [{ name: 'u', token: 'wrong' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const unauth = await rejects(other.makeApiClient(CoreV1Api).listNode());
    assert.equal(unauth.code, 401);
    const status = await raw(api, '/api/v1/nodes', 'wrong');
    assert.deepEqual(
      [status.status, (status.body as { kind: string; reason: string }).reason],
      [401, 'Unauthorized'],
    );
    const allow = api.hooks.forbid({ verb: 'list', resource: 'secrets' });
    const denied = await rejects(core.listNamespacedSecret({ namespace: 'ns' }));
    assert.equal(denied.code, 403);
    assert.equal(
      JSON.parse(denied.body).message,
      'secrets is forbidden: User "system:node:test-node" cannot list resource "secrets" in API group "" in the namespace "ns"',
    );
    allow();
    assert.deepEqual((await core.listNamespacedSecret({ namespace: 'ns' })).items, []);

    // A rotated token makes the old one a 401.
    api.hooks.setToken('rotated');
    const stale = await rejects(core.listNode());
    assert.equal(stale.code, 401);
  });

  test('TokenRequest: token + expiry, 404 for a missing service account, 403 when forbidden', async (t) => {
    const { api, core } = await setup(t);
    const missing = await rejects(
      core.createNamespacedServiceAccountToken({
        namespace: 'ns',
        name: 'sa',
        body: { spec: { audiences: [] } },
      }),
    );
    assert.equal(missing.code, 404);
    assert.equal(JSON.parse(missing.body).message, 'serviceaccounts "sa" not found');

    await core.createNamespacedServiceAccount({ namespace: 'ns', body: { metadata: { name: 'sa' } } });
    const p = await core.createNamespacedPod({
      namespace: 'ns',
      body: {
        ...pod('ns', 'p', 'node1'),
        spec: { ...must(pod('ns', 'p').spec, 'spec'), serviceAccountName: 'sa' },
      },
    });
    const before = Date.now();
    const tr = await core.createNamespacedServiceAccountToken({
      namespace: 'ns',
      name: 'sa',
      body: {
        spec: {
          audiences: ['vault'],
          expirationSeconds: 3600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'p', uid: must(p.metadata, 'metadata').uid },
        },
      },
    });
    const token = tr.status?.token ?? '';
    assert.equal(token.split('.').length, 3);
    const claims = JSON.parse(Buffer.from(at(token.split('.'), 1, 'JWT payload'), 'base64url').toString());
    assert.deepEqual(claims.aud, ['vault']);
    assert.equal(claims['kubernetes.io'].pod.uid, must(p.metadata, 'metadata').uid);
    const exp = new Date(must(tr.status, 'status').expirationTimestamp as unknown as string).getTime();
    assert.ok(
      exp >= Math.floor(before / 1000) * 1000 + 3600_000 && exp <= Date.now() + 3600_000,
      String(exp),
    );
    const again = await core.createNamespacedServiceAccountToken({
      namespace: 'ns',
      name: 'sa',
      body: { spec: { audiences: ['vault'] } },
    });
    assert.notEqual(again.status?.token, token);
    assert.equal(api.hooks.issuedTokens.length, 2);

    const wrongUID = await rejects(
      core.createNamespacedServiceAccountToken({
        namespace: 'ns',
        name: 'sa',
        body: {
          spec: { audiences: [], boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'p', uid: 'old' } },
        },
      }),
    );
    assert.equal(wrongUID.code, 409);

    api.hooks.forbid({ verb: 'create', resource: 'serviceaccounts', subresource: 'token' });
    const forbidden = await rejects(
      core.createNamespacedServiceAccountToken({
        namespace: 'ns',
        name: 'sa',
        body: { spec: { audiences: [] } },
      }),
    );
    assert.equal(forbidden.code, 403);
    assert.match(JSON.parse(forbidden.body).message, /cannot create resource "serviceaccounts\/token"/);
  });

  test('events: create, merge-patch and list', async (t) => {
    const { core } = await setup(t);
    const ev = await core.createNamespacedEvent({
      namespace: 'ns',
      body: {
        metadata: { name: 'p.1' },
        involvedObject: { kind: 'Pod', name: 'p', namespace: 'ns' },
        reason: 'FailedMount',
        message: 'boom',
        count: 1,
        type: 'Warning',
      },
    });
    assert.equal(ev.count, 1);
    const patched = await core.patchNamespacedEvent(
      { namespace: 'ns', name: 'p.1', body: { count: 2 } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    assert.equal(patched.count, 2);
    assert.equal(patched.reason, 'FailedMount');
    const list = await core.listNamespacedEvent({ namespace: 'ns', fieldSelector: 'involvedObject.name=p' });
    assert.equal(list.items.length, 1);
  });

  test('storage.k8s.io csidrivers and certificates.k8s.io clustertrustbundles with label selectors', async (t) => {
    const { kc } = await setup(t);
    const storage = kc.makeApiClient(StorageV1Api);
    await storage.createCSIDriver({
      body: { metadata: { name: 'csi.example.com' }, spec: { podInfoOnMount: true } },
    });
    const d = await storage.readCSIDriver({ name: 'csi.example.com' });
    assert.equal(d.spec.podInfoOnMount, true);
    assert.equal(d.apiVersion, 'storage.k8s.io/v1');

    const certs = kc.makeApiClient(CertificatesV1beta1Api);
    await certs.createClusterTrustBundle({
      body: {
        metadata: { name: 'example.com:signer:a', labels: { set: 'one' } },
        spec: { signerName: 'example.com/signer', trustBundle: 'PEM' },
      },
    });
    await certs.createClusterTrustBundle({
      body: { metadata: { name: 'b', labels: { set: 'two' } }, spec: { trustBundle: 'PEM2' } },
    });
    const one = await certs.listClusterTrustBundle({ labelSelector: 'set=one' });
    assert.deepEqual(
      one.items.map((b) => b.metadata?.name),
      ['example.com:signer:a'],
    );
    const bySigner = await certs.listClusterTrustBundle({
      fieldSelector: 'spec.signerName=example.com/signer',
    });
    assert.equal(bySigner.items.length, 1);
  });

  test('discovery lists the certificates.k8s.io versions the server is told to serve', async (t) => {
    const { api } = await setup(t, { clusterTrustBundleVersions: ['v1alpha1'] });
    const get = (path: string) => raw(api, path);
    const group = (await get('/apis/certificates.k8s.io')).body as { versions: { version: string }[] };
    assert.deepEqual(
      group.versions.map((v) => v.version),
      ['v1alpha1'],
    );
    const beta = await get('/apis/certificates.k8s.io/v1beta1/clustertrustbundles');
    assert.equal(beta.status, 404);
  });
});
