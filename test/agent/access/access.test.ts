// The HTTP port of a non-loopback podvol: TLS, TokenReview and client
// certificates, SubjectAccessReview with kubelet's attributes, against the
// test API server (its RBAC decides) through the real client-node.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import {
  ACCESS_DEFAULTS,
  type AccessOptions,
  createSecureServing,
  resolveAccess,
} from '../../../src/agent/access/serving.ts';
import { createHttpServer } from '../../../src/agent/http.ts';
import { startTestApiServer, type TestApiServer } from '../../apiserver/server.ts';
import { httpsRequest } from '../../helpers/https.ts';
import { listenLocal } from '../../helpers/listen.ts';
import { tempDir } from '../../helpers/mountns.ts';
import { at, must } from '../../helpers/must.ts';
import { createTestCA, type Issued } from '../../helpers/pki.ts';

const NODE = 'node-1';

interface Call {
  token?: string;
  client?: Issued;
  method?: string;
}

interface Port {
  url: string;
  /** PEM the client trusts (the generated or given serving chain). */
  ca: string;
  rootDir: string;
  call(path: string, c?: Call): Promise<{ status: number; body: string }>;
}

async function startPort(
  t: TestContext,
  o: { api?: TestApiServer; access?: Partial<AccessOptions>; rootDir?: string } = {},
): Promise<Port> {
  const rootDir = o.rootDir ?? (await tempDir(t));
  let kubeConfig: KubeConfig | undefined;
  if (o.api) {
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(await o.api.kubeconfigPath(await tempDir(t)));
  }
  const registry = new Registry();
  const secure = await createSecureServing({
    access: { ...ACCESS_DEFAULTS, ...o.access },
    listenHost: '0.0.0.0',
    rootDir,
    nodeName: NODE,
    kubeConfig,
    logger: pino({ level: 'silent' }),
  });
  assert.ok(secure, 'a non-loopback listener is secured');
  const server: Server = createHttpServer(
    {
      registry,
      alive: () => true,
      ready: () => ({ ready: true, reasons: [] }),
      status: () => ({ node: NODE, pods: [{ namespace: 'default', name: 'secret-holder' }] }),
    },
    secure,
  );
  const port = await listenLocal(server);
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((ok) => server.close(() => ok()));
  });
  const url = `https://127.0.0.1:${port}`;
  const ca = o.access?.tlsCertFile
    ? await readFile(o.access.tlsCertFile, 'utf8')
    : await readFile(join(rootDir, 'pki', 'podvol.crt'), 'utf8');
  return {
    url,
    ca,
    rootDir,
    call: (path, c = {}) =>
      httpsRequest(url + path, {
        ca,
        method: c.method,
        token: c.token,
        cert: c.client?.cert,
        key: c.client?.key,
      }),
  };
}

/** RBAC in the test API server: a ClusterRole with `rules`, bound to `subject`. */
function grant(api: TestApiServer, name: string, subject: object, resources: string[]) {
  api.store.create('clusterroles.rbac.authorization.k8s.io', {
    metadata: { name },
    rules: [{ apiGroups: [''], resources, verbs: ['get'] }],
  } as never);
  api.store.create('clusterrolebindings.rbac.authorization.k8s.io', {
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [subject],
  } as never);
}

async function apiWithUsers(t: TestContext) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  api.hooks.addUser('token-admin', { username: 'admin', groups: ['ops'] });
  api.hooks.addUser('token-scraper', { username: 'scraper' });
  api.hooks.addUser('token-nobody', { username: 'nobody' });
  grant(api, 'ops-proxy', { kind: 'Group', name: 'ops' }, ['nodes/proxy', 'nodes/metrics']);
  grant(api, 'scraper-metrics', { kind: 'User', name: 'scraper' }, ['nodes/metrics']);
  return api;
}

const reviews = (api: TestApiServer, plural: string) =>
  api.hooks.requests.filter((r) => r.resource === plural && r.verb === 'create').length;

describe('bearer tokens: TokenReview then SubjectAccessReview', () => {
  test('no token or an unknown one: 401; a user without nodes/proxy: 403 on /status; allowed: 200', async (t) => {
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: { tokenWebhook: true, authorizationMode: 'Webhook' } });

    assert.equal((await port.call('/status')).status, 401);
    assert.equal((await port.call('/metrics')).status, 401);
    assert.equal((await port.call('/status', { token: 'no-such-token' })).status, 401);

    const nobody = await port.call('/status', { token: 'token-nobody' });
    assert.equal(nobody.status, 403);
    assert.match(nobody.body, /user=nobody, verb=get, resource=nodes, subresource=proxy/);
    assert.doesNotMatch(nobody.body, /secret-holder/);

    const scraperStatus = await port.call('/status', { token: 'token-scraper' });
    assert.equal(scraperStatus.status, 403);
    assert.equal((await port.call('/metrics', { token: 'token-scraper' })).status, 200);
    assert.equal((await port.call('/metrics', { token: 'token-nobody' })).status, 403);

    const admin = await port.call('/status', { token: 'token-admin' });
    assert.equal(admin.status, 200);
    assert.match(admin.body, /secret-holder/);

    // The SubjectAccessReviews carried kubelet's attributes for this node.
    const sar = api.hooks.requests.find(
      (r) =>
        r.resource === 'subjectaccessreviews' &&
        (r.body as { spec?: { user?: string } })?.spec?.user === 'scraper',
    );
    assert.ok(sar, 'a SubjectAccessReview for scraper');
    assert.deepEqual((sar.body as { spec: { resourceAttributes: unknown } }).spec.resourceAttributes, {
      namespace: '',
      verb: 'get',
      group: '',
      version: 'v1',
      resource: 'nodes',
      subresource: 'proxy',
      name: NODE,
    });
  });

  test('/healthz and /readyz answer without any credential; other methods are checked first', async (t) => {
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: {} });
    assert.deepEqual(await port.call('/healthz'), { status: 200, body: 'ok\n' });
    assert.deepEqual(await port.call('/readyz'), { status: 200, body: 'ok\n' });
    assert.equal((await port.call('/status', { method: 'POST' })).status, 401);
    // Authorized as create nodes/proxy, which admin lacks.
    assert.equal((await port.call('/status', { method: 'POST', token: 'token-admin' })).status, 403);
    assert.equal((await port.call('/nowhere', { token: 'token-admin' })).status, 404);
    assert.equal(reviews(api, 'tokenreviews') > 0, true);
  });

  test('answers are cached: a repeated token costs no TokenReview, a repeated decision no SubjectAccessReview', async (t) => {
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: {} });
    for (let i = 0; i < 5; i++)
      assert.equal((await port.call('/status', { token: 'token-admin' })).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await port.call('/status', { token: 'bogus' })).status, 401);
    assert.equal(reviews(api, 'tokenreviews'), 2);
    assert.equal(reviews(api, 'subjectaccessreviews'), 1);
  });

  test('TTL 0 turns the token cache off', async (t) => {
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: { tokenWebhookCacheTtlMs: 0 } });
    for (let i = 0; i < 3; i++) await port.call('/metrics', { token: 'token-scraper' });
    assert.equal(reviews(api, 'tokenreviews'), 3);
  });

  test('the API server down, or podvol not allowed to ask: 503, never open', async (t) => {
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: {} });
    const undo = api.hooks.forbid({ resource: 'subjectaccessreviews' });
    const forbidden = await port.call('/status', { token: 'token-admin' });
    assert.equal(forbidden.status, 503);
    assert.match(forbidden.body, /SubjectAccessReview/);
    undo();
    await api.hooks.down();
    const down = await port.call('/status', { token: 'token-scraper' });
    assert.equal(down.status, 503);
    assert.match(down.body, /TokenReview/);
    assert.equal((await port.call('/status')).status, 401, 'no credential is still 401');
    assert.equal((await port.call('/healthz')).status, 200);
    await api.hooks.up();
    assert.equal((await port.call('/status', { token: 'token-admin' })).status, 200);
  });

  test('service-account tokens the API server issued authenticate as the service account', async (t) => {
    const api = await apiWithUsers(t);
    api.store.create('serviceaccounts', {
      metadata: { name: 'prometheus', namespace: 'monitoring' },
    });
    grant(api, 'prom', { kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }, [
      'nodes/metrics',
    ]);
    const kc = new KubeConfig();
    kc.loadFromFile(await api.kubeconfigPath(await tempDir(t)));
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const tr = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
      name: 'prometheus',
      namespace: 'monitoring',
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const port = await startPort(t, { api, access: {} });
    const token = must(tr.status, 'status').token;
    assert.equal((await port.call('/metrics', { token })).status, 200);
    assert.equal((await port.call('/status', { token })).status, 403);
  });
});

describe('deploy/prometheus/rbac-prometheus.yaml', () => {
  test("lets Prometheus' service account scrape /metrics and nothing else", async (t) => {
    const { readFileSync } = await import('node:fs');
    const { parseAllDocuments } = await import('yaml');
    const api = await startTestApiServer();
    t.after(() => api.close());
    const text = readFileSync(
      new URL('../../../deploy/prometheus/rbac-prometheus.yaml', import.meta.url),
      'utf8',
    );
    const docs = parseAllDocuments(text).map((d) => d.toJS());
    const binding = docs.find((d) => d.kind === 'ClusterRoleBinding');
    const subject = binding.subjects[0] as { name: string; namespace: string };
    for (const d of docs)
      api.store.create(
        d.kind === 'ClusterRole'
          ? 'clusterroles.rbac.authorization.k8s.io'
          : 'clusterrolebindings.rbac.authorization.k8s.io',
        d,
      );
    api.store.create('serviceaccounts', { metadata: { name: subject.name, namespace: subject.namespace } });
    api.store.create('serviceaccounts', { metadata: { name: 'someone', namespace: subject.namespace } });
    const kc = new KubeConfig();
    kc.loadFromFile(await api.kubeconfigPath(await tempDir(t)));
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const tokenFor = async (name: string) => {
      const tr = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
        name,
        namespace: subject.namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      return must(tr.status, 'TokenRequest status').token;
    };
    const port = await startPort(t, { api, access: {} });
    const prometheus = await tokenFor(subject.name);
    assert.equal((await port.call('/metrics', { token: prometheus })).status, 200);
    assert.equal((await port.call('/status', { token: prometheus })).status, 403);
    assert.equal((await port.call('/metrics', { token: await tokenFor('someone') })).status, 403);
  });
});

describe('TLS', () => {
  test('without --tls-cert-file a self-signed CA and certificate are generated into the root dir, and reused', async (t) => {
    const rootDir = await tempDir(t);
    const api = await apiWithUsers(t);
    const first = await startPort(t, { api, rootDir });
    const key = await stat(join(rootDir, 'pki', 'podvol.key'));
    assert.equal(key.mode & 0o777, 0o600);
    // The client verified the chain and the 127.0.0.1 address against the generated CA.
    assert.equal((await first.call('/healthz')).status, 200);
    const pems = first.ca.match(/-----BEGIN CERTIFICATE-----/g) ?? [];
    assert.equal(pems.length, 2, 'certificate then CA');
    const { X509Certificate } = await import('node:crypto');
    const certs = (first.ca.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []).map(
      (p) => new X509Certificate(p),
    );
    const leaf = at(certs, 0, 'serving certificate');
    const ca = at(certs, 1, 'CA certificate');
    assert.match(leaf.subject, new RegExp(`CN=${NODE}@\\d+`));
    assert.match(ca.subject, new RegExp(`CN=${NODE}-ca@\\d+`));
    assert.ok(leaf.verify(ca.publicKey));
    assert.match(leaf.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    assert.match(leaf.subjectAltName ?? '', new RegExp(`DNS:${NODE}`));
    const second = await startPort(t, { api, rootDir });
    assert.equal(second.ca, first.ca, 'the same certificate on the next start');
  });

  test('--tls-cert-file and --tls-private-key-file are served as given', async (t) => {
    const dir = await tempDir(t);
    const { generateSelfSigned } = await import('../../../src/agent/access/certs.ts');
    const pair = await generateSelfSigned('given', ['127.0.0.1']);
    const { writeFile } = await import('node:fs/promises');
    await writeFile(join(dir, 'tls.crt'), pair.cert);
    await writeFile(join(dir, 'tls.key'), pair.key, { mode: 0o600 });
    const api = await apiWithUsers(t);
    const port = await startPort(t, {
      api,
      access: { tlsCertFile: join(dir, 'tls.crt'), tlsPrivateKeyFile: join(dir, 'tls.key') },
    });
    assert.equal((await port.call('/status', { token: 'token-admin' })).status, 200);
    await assert.rejects(stat(join(port.rootDir, 'pki')), { code: 'ENOENT' });
  });
});

describe('rotation', () => {
  test('a rewritten --tls-cert-file/--tls-private-key-file and --client-ca-file are picked up without a restart', async (t) => {
    const dir = await tempDir(t);
    const { generateSelfSigned } = await import('../../../src/agent/access/certs.ts');
    const { writeFile, rename } = await import('node:fs/promises');
    const write = async (name: string, data: string) => {
      // As cert tooling does: a new file renamed over the old one.
      await writeFile(join(dir, `${name}.new`), data, { mode: 0o600 });
      await rename(join(dir, `${name}.new`), join(dir, name));
    };
    const first = await generateSelfSigned('first', ['127.0.0.1']);
    const oldCA = createTestCA('old-ca');
    await write('tls.crt', first.cert);
    await write('tls.key', first.key);
    await write('ca.crt', oldCA.cert);
    const rootDir = await tempDir(t);
    const registry = new Registry();
    const secure = await createSecureServing({
      access: {
        ...ACCESS_DEFAULTS,
        tlsCertFile: join(dir, 'tls.crt'),
        tlsPrivateKeyFile: join(dir, 'tls.key'),
        clientCaFile: join(dir, 'ca.crt'),
      },
      listenHost: '0.0.0.0',
      rootDir,
      nodeName: NODE,
      logger: pino({ level: 'silent' }),
    });
    assert.ok(secure);
    const server = createHttpServer(
      { registry, alive: () => true, ready: () => ({ ready: true, reasons: [] }), status: () => ({}) },
      secure,
    );
    const port = await listenLocal(server);
    const stop = secure.watchFiles(server as never, 50);
    t.after(() => {
      stop();
      server.closeAllConnections();
      return new Promise<void>((ok) => server.close(() => ok()));
    });
    const get = async (ca: string, client: Issued) =>
      (await httpsRequest(`https://127.0.0.1:${port}/status`, { ca, cert: client.cert, key: client.key }))
        .status;
    assert.equal(await get(first.cert, oldCA.client('a')), 200);

    const second = await generateSelfSigned('second', ['127.0.0.1']);
    const newCA = createTestCA('new-ca');
    await write('tls.crt', second.cert);
    await write('tls.key', second.key);
    await write('ca.crt', newCA.cert);
    const { waitFor } = await import('../../helpers/daemon.ts');
    await waitFor(
      'the new certificate served',
      async () => (await get(second.cert, newCA.client('a'))) === 200,
    );
    assert.equal(await get(second.cert, oldCA.client('a')), 401, 'the old client CA is gone');
    await assert.rejects(get(first.cert, newCA.client('a')), 'the old serving certificate is gone');
  });
});

describe('client certificates', () => {
  test('accepted when signed by --client-ca-file (CN user, O groups), refused otherwise', async (t) => {
    const dir = await tempDir(t);
    const ca = createTestCA();
    const other = createTestCA('someone-else');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(join(dir, 'ca.crt'), ca.cert);
    const api = await apiWithUsers(t);
    const port = await startPort(t, { api, access: { clientCaFile: join(dir, 'ca.crt') } });

    assert.equal((await port.call('/status', { client: ca.client('carol', ['ops']) })).status, 200);
    assert.equal((await port.call('/status', { client: ca.client('dave') })).status, 403);
    assert.equal((await port.call('/status', { client: other.client('carol', ['ops']) })).status, 401);
    assert.equal(
      (await port.call('/status', { client: ca.client('carol', ['ops'], { expired: true }) })).status,
      401,
    );
    assert.equal(
      (await port.call('/status', { client: ca.client('carol', ['ops'], { extKeyUsage: 'serverAuth' }) }))
        .status,
      401,
    );
    // A refused certificate does not stop a good token (kubelet's union of authenticators).
    assert.equal(
      (await port.call('/status', { client: other.client('x'), token: 'token-admin' })).status,
      200,
    );
  });

  test('standalone: client certificates with --authorization-mode AlwaysAllow, no API server', async (t) => {
    const dir = await tempDir(t);
    const ca = createTestCA();
    const { writeFile } = await import('node:fs/promises');
    await writeFile(join(dir, 'ca.crt'), ca.cert);
    const port = await startPort(t, { access: { clientCaFile: join(dir, 'ca.crt') } });
    assert.equal((await port.call('/status', { client: ca.client('anyone') })).status, 200);
    assert.equal((await port.call('/status')).status, 401);
    assert.equal((await port.call('/status', { token: 'whatever' })).status, 401);
  });
});

describe('which listener gets what', () => {
  const base = { ...ACCESS_DEFAULTS };
  test('loopback stays plain HTTP without authentication', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost'])
      assert.deepEqual(resolveAccess(base, host, true), { secure: false });
  });
  test('elsewhere: TLS, token webhook and Webhook authorization by default in cluster mode', () => {
    const r = resolveAccess(base, '0.0.0.0', true);
    assert.ok(r.secure);
    assert.equal(r.tokenWebhook, true);
    assert.equal(r.authorizationMode, 'Webhook');
  });
  test('contradictions are refused with a clear message', () => {
    assert.throws(() => resolveAccess(base, '0.0.0.0', false), /callers must authenticate/);
    assert.throws(
      () => resolveAccess({ ...base, tokenWebhook: true }, '10.0.0.1', false),
      /needs an API server/,
    );
    assert.throws(
      () => resolveAccess({ ...base, clientCaFile: 'ca', authorizationMode: 'Webhook' }, '::', false),
      /Webhook needs an API server/,
    );
    assert.throws(() => resolveAccess({ ...base, tlsCertFile: 'c' }, '0.0.0.0', true), /go together/);
    assert.throws(
      () => resolveAccess({ ...base, tokenWebhook: false }, '0.0.0.0', true),
      /callers must authenticate/,
    );
  });
});
