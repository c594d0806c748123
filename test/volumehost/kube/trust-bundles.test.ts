import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  labelSelectorString,
  labelsMatch,
  normalizeTrustAnchors,
  parseLabelSelector,
  pemBlocks,
} from '../../../src/volumehost/kube/trust-bundles.ts';

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
