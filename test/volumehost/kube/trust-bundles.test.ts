import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { systemClock } from '../../../src/clock.ts';
import {
  createStandaloneTrustBundleManager,
  createTrustBundleManager,
  labelSelectorString,
  labelsMatch,
  normalizeTrustAnchors,
  parseLabelSelector,
  pemBlocks,
  STANDALONE_TRUST_BUNDLE_ERROR,
  type TrustBundleManager,
} from '../../../src/volumehost/kube/trust-bundles.ts';
import type { TestApiServer } from '../../apiserver/server.ts';
import { kubeEnv } from './env.ts';

// Trust anchors are handled as opaque DER bytes (kubelet does not parse them either).
const derA = Buffer.from('certificate A '.repeat(10));
const derB = Buffer.from('certificate B '.repeat(12));
const derC = Buffer.from('certificate C '.repeat(7));

function pem(der: Buffer, width = 64, eol = '\n'): string {
  const lines = der.toString('base64').match(new RegExp(`.{1,${width}}`, 'g')) ?? [];
  return `-----BEGIN CERTIFICATE-----${eol}${lines.join(eol)}${eol}-----END CERTIFICATE-----${eol}`;
}

describe('PEM normalization', () => {
  test('reads every block regardless of line width, CRLF and surrounding text', () => {
    const text = `# ops bundle\n${pem(derA, 76, '\r\n')}junk between\n${pem(derB)}`;
    assert.deepEqual(pemBlocks(text), [derA, derB]);
  });

  test('skips a block whose body is not base64', () => {
    const text = `-----BEGIN CERTIFICATE-----\n!!!notbase64\n-----END CERTIFICATE-----\n${pem(derC)}`;
    assert.deepEqual(pemBlocks(text), [derC]);
  });

  test('deduplicates across bundles and re-encodes as 64-column CERTIFICATE blocks', () => {
    const out = normalizeTrustAnchors([pem(derA, 76) + pem(derB), pem(derB, 48) + pem(derA)], 'seed');
    assert.deepEqual(pemBlocks(out).map(String).sort(), [String(derA), String(derB)].sort());
    for (const line of out.trimEnd().split('\n')) {
      assert.ok(line.startsWith('-----') || line.length <= 64, line);
    }
    assert.ok(out.endsWith('-----END CERTIFICATE-----\n'));
  });

  test('the order is stable for one seed, independent of input order', () => {
    const one = normalizeTrustAnchors([pem(derA) + pem(derB) + pem(derC)], 'seed-1');
    const two = normalizeTrustAnchors([pem(derC), pem(derB) + pem(derA)], 'seed-1');
    assert.equal(one, two);
  });

  test('adding a certificate keeps the relative order of the others', () => {
    const before = pemBlocks(normalizeTrustAnchors([pem(derA) + pem(derB)], 's')).map(String);
    const after = pemBlocks(normalizeTrustAnchors([pem(derA) + pem(derB) + pem(derC)], 's'))
      .map(String)
      .filter((d) => d !== String(derC));
    assert.deepEqual(after, before);
  });

  test('an empty or certificate-free bundle normalizes to nothing', () => {
    assert.equal(normalizeTrustAnchors(['', 'no pem here'], 's'), '');
  });
});

describe('label selectors (metav1.LabelSelectorAsSelector)', () => {
  test('nil matches nothing, empty matches everything', () => {
    assert.equal(parseLabelSelector(undefined), null);
    assert.equal(labelsMatch(parseLabelSelector(undefined), { a: 'b' }), false);
    const all = parseLabelSelector({});
    assert.deepEqual(all, []);
    assert.equal(labelSelectorString(all ?? []), '');
    assert.equal(labelsMatch(all, undefined), true);
  });

  test('prints requirements sorted by key, in the API server syntax', () => {
    const reqs = parseLabelSelector({
      matchLabels: { tier: 'prod' },
      matchExpressions: [
        { key: 'zone', operator: 'In', values: ['b', 'a'] },
        { key: 'env', operator: 'NotIn', values: ['dev'] },
        { key: 'approved', operator: 'Exists' },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    });
    assert.equal(labelSelectorString(reqs ?? []), 'approved,env notin (dev),!legacy,tier=prod,zone in (a,b)');
  });

  test('evaluates each operator', () => {
    const reqs = parseLabelSelector({
      matchLabels: { tier: 'prod' },
      matchExpressions: [
        { key: 'zone', operator: 'In', values: ['a', 'b'] },
        { key: 'env', operator: 'NotIn', values: ['dev'] },
        { key: 'approved', operator: 'Exists' },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    });
    const ok = { tier: 'prod', zone: 'a', approved: '' };
    assert.equal(labelsMatch(reqs, ok), true);
    assert.equal(labelsMatch(reqs, { ...ok, tier: 'dev' }), false);
    assert.equal(labelsMatch(reqs, { ...ok, zone: 'c' }), false);
    assert.equal(labelsMatch(reqs, { ...ok, env: 'dev' }), false);
    assert.equal(labelsMatch(reqs, { tier: 'prod', zone: 'a' }), false);
    assert.equal(labelsMatch(reqs, { ...ok, legacy: 'yes' }), false);
  });

  test('rejects malformed requirements with kubelet/apimachinery wording', () => {
    assert.throws(
      () => parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }),
      /values set can't be empty/,
    );
    assert.throws(
      () => parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }),
      /values set must be empty for exists and does not exist/,
    );
    assert.throws(
      () => parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] }),
      /"Gt" is not a valid label selector operator/,
    );
  });
});

interface Env {
  api: TestApiServer;
  mgr: TrustBundleManager;
  advance(ms: number): void;
  addBundle(name: string, trustBundle: string, signerName?: string, labels?: Record<string, string>): void;
}

async function setup(t: TestContext, versions: string[]): Promise<Env> {
  const { api, kc } = await kubeEnv(t, { clusterTrustBundleVersions: versions });
  let clock = Date.UTC(2030, 0, 1);
  const mgr = createTrustBundleManager({
    kubeConfig: kc,
    // Real timers for the watch; the cache's time and the certificate order are the test's.
    clock: { ...systemClock(), now: () => clock, random: () => 0.5 },
    cacheTTLMs: 10_000,
    syncTimeoutMs: 3_000,
    backoff: { initialMs: 50, maxMs: 200 },
  });
  t.after(() => mgr.stop?.());
  return {
    api,
    mgr,
    advance: (ms) => {
      clock += ms;
    },
    addBundle(name, trustBundle, signerName, labels) {
      if (versions.length === 0) return;
      api.store.create('clustertrustbundles', {
        metadata: { name, labels },
        spec: { trustBundle, ...(signerName ? { signerName } : {}) },
      });
    },
  };
}

const certs = (text: string) => pemBlocks(text).map(String).sort();

describe('trust bundle manager against an API server', () => {
  for (const [served, expected] of [
    [['v1'], 'v1'],
    [['v1beta1'], 'v1beta1'],
    [['v1alpha1'], 'v1alpha1'],
    [['v1alpha1', 'v1beta1'], 'v1beta1'],
    [['v1alpha1', 'v1beta1', 'v1'], 'v1'],
  ] as const) {
    test(`serving ${served.join('+')}, bundles are read through ${expected}`, async (t) => {
      const env = await setup(t, [...served]);
      env.addBundle('ops-roots', pem(derA) + pem(derB) + pem(derA));
      const out = await env.mgr.getTrustAnchorsByName('ops-roots', false);
      assert.deepEqual(certs(out), [String(derA), String(derB)].sort());
      // One list+watch of every bundle (kubelet's informer), not a GET per lookup.
      const paths = env.api.hooks.requests.map((r) => r.path);
      assert.ok(
        paths.includes(`/apis/certificates.k8s.io/${expected}/clustertrustbundles`),
        paths.join('\n'),
      );
      assert.ok(!paths.some((p) => p.endsWith('/clustertrustbundles/ops-roots')), paths.join('\n'));
    });
  }

  test('a missing named bundle is empty when allowed, an error otherwise', async (t) => {
    const env = await setup(t, ['v1beta1']);
    assert.equal(await env.mgr.getTrustAnchorsByName('nope', true), '');
    await assert.rejects(
      env.mgr.getTrustAnchorsByName('nope', false),
      /^ApiError: while getting ClusterTrustBundle: clustertrustbundle\.certificates\.k8s\.io "nope" not found$/,
    );
  });

  test('by signer: merges every matching bundle, filtered by signer and labels', async (t) => {
    const env = await setup(t, ['v1beta1']);
    env.addBundle('example.com:mesh:a', pem(derA), 'example.com/mesh', { trust: 'yes', zone: 'a' });
    env.addBundle('example.com:mesh:b', pem(derB) + pem(derA), 'example.com/mesh', {
      trust: 'yes',
      zone: 'b',
    });
    env.addBundle('example.com:mesh:c', pem(derC), 'example.com/mesh', { trust: 'no' });
    env.addBundle('other.io:x', pem(derC), 'other.io/x', { trust: 'yes' });

    const all = await env.mgr.getTrustAnchorsBySigner('example.com/mesh', {}, false);
    assert.deepEqual(certs(all), [String(derA), String(derB), String(derC)].sort());

    const trusted = await env.mgr.getTrustAnchorsBySigner(
      'example.com/mesh',
      { matchLabels: { trust: 'yes' } },
      false,
    );
    assert.deepEqual(certs(trusted), [String(derA), String(derB)].sort());

    const zoneB = await env.mgr.getTrustAnchorsBySigner(
      'example.com/mesh',
      {
        matchExpressions: [
          { key: 'zone', operator: 'In', values: ['b'] },
          { key: 'trust', operator: 'Exists' },
        ],
      },
      false,
    );
    assert.deepEqual(certs(zoneB), [String(derA), String(derB)].sort());

    const notA = await env.mgr.getTrustAnchorsBySigner(
      'example.com/mesh',
      {
        matchExpressions: [
          { key: 'zone', operator: 'NotIn', values: ['a'] },
          { key: 'zone', operator: 'Exists' },
        ],
      },
      false,
    );
    assert.deepEqual(certs(notA), [String(derA), String(derB)].sort());

    const unzoned = await env.mgr.getTrustAnchorsBySigner(
      'example.com/mesh',
      { matchExpressions: [{ key: 'zone', operator: 'DoesNotExist' }] },
      false,
    );
    assert.deepEqual(certs(unzoned), [String(derC)]);

    // Every lookup is answered from the watch cache: one list in all.
    assert.equal(env.api.hooks.requests.filter((r) => r.verb === 'list').length, 1);
  });

  test('by signer: zero matches is empty when allowed, kubelet error otherwise; nil selector matches nothing', async (t) => {
    const env = await setup(t, ['v1']);
    env.addBundle('example.com:mesh:a', pem(derA), 'example.com/mesh', { trust: 'yes' });
    assert.equal(
      await env.mgr.getTrustAnchorsBySigner('example.com/mesh', { matchLabels: { trust: 'no' } }, true),
      '',
    );
    await assert.rejects(
      env.mgr.getTrustAnchorsBySigner('example.com/mesh', { matchLabels: { trust: 'no' } }, false),
      { message: 'combination of signerName and labelSelector matched zero ClusterTrustBundles' },
    );
    await assert.rejects(env.mgr.getTrustAnchorsBySigner('example.com/mesh', undefined, false), {
      message: 'combination of signerName and labelSelector matched zero ClusterTrustBundles',
    });
  });

  test('a changed bundle is served as soon as the watch delivers it, and listeners hear of it', async (t) => {
    const env = await setup(t, ['v1beta1']);
    env.addBundle('roots', pem(derA));
    const heard: string[] = [];
    env.mgr.onChange?.((name) => heard.push(name));
    const before = await env.mgr.getTrustAnchorsByName('roots', false);
    assert.deepEqual(certs(before), [String(derA)]);
    env.api.store.update('clustertrustbundles', {
      ...env.api.store.mustGet('clustertrustbundles', undefined, 'roots'),
      spec: { trustBundle: pem(derA) + pem(derB) },
    });
    // No clock advance: the watch event drops the cached normalization (kubelet's dropCacheFor).
    const deadline = Date.now() + 10_000;
    while (certs(await env.mgr.getTrustAnchorsByName('roots', false)).length !== 2) {
      assert.ok(Date.now() < deadline, 'timed out waiting for the new bundle');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(heard.includes('roots'));
  });

  test('a forbidden list surfaces "forbidden"', async (t) => {
    const env = await setup(t, ['v1beta1']);
    env.api.hooks.forbid({ resource: 'clustertrustbundles', verb: 'list' });
    await assert.rejects(env.mgr.getTrustAnchorsBySigner('example.com/mesh', {}, false), (err: Error) => {
      assert.match(err.message, /^ClusterTrustBundle informer has not yet synced: .*forbidden/);
      return true;
    });
  });

  test('no served version behaves like kubelet without the API', async (t) => {
    const env = await setup(t, []);
    await assert.rejects(env.mgr.getTrustAnchorsByName('roots', true), {
      message: STANDALONE_TRUST_BUNDLE_ERROR,
    });
  });
});

test('standalone mode fails with kubelet-compatible wording', async () => {
  const mgr = createStandaloneTrustBundleManager();
  await assert.rejects(mgr.getTrustAnchorsByName('x', true), { message: STANDALONE_TRUST_BUNDLE_ERROR });
  assert.ok(STANDALONE_TRUST_BUNDLE_ERROR.startsWith('ClusterTrustBundle projection is not supported in '));
});
