import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1NodeSelectorTerm } from '@kubernetes/client-node';
import { nodeAffinityMismatch } from '../../../src/plugins/util/node-affinity.ts';

const node = { name: 'n1', labels: { zone: 'a', tier: '3' } };
const pv = (terms: V1NodeSelectorTerm[] | undefined) => ({
  spec: { nodeAffinity: terms === undefined ? undefined : { required: { nodeSelectorTerms: terms } } },
});
const check = (terms: V1NodeSelectorTerm[] | undefined) => nodeAffinityMismatch(pv(terms), node);

test('required node affinity: terms ORed, requirements ANDed, as kubelet matches them', () => {
  assert.equal(check(undefined), undefined, 'no affinity: any node');
  assert.equal(
    check([{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }]),
    undefined,
  );
  assert.equal(
    check([{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }]),
    'no matching NodeSelectorTerms',
  );
  assert.equal(
    check([
      { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }] },
      {
        matchExpressions: [
          { key: 'gpu', operator: 'DoesNotExist' },
          { key: 'tier', operator: 'Lt', values: ['4'] },
        ],
      },
    ]),
    undefined,
    'the second term matches',
  );
  assert.equal(
    check([
      {
        matchExpressions: [
          { key: 'zone', operator: 'Exists' },
          { key: 'tier', operator: 'Gt', values: ['3'] },
        ],
      },
    ]),
    'no matching NodeSelectorTerms',
  );
  assert.equal(check([{}]), 'no matching NodeSelectorTerms', 'an empty term matches nothing');
  assert.equal(check([]), 'no matching NodeSelectorTerms');
  assert.equal(
    check([{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }]),
    undefined,
  );
  assert.match(
    check([{ matchExpressions: [{ key: 'tier', operator: 'Gt', values: ['x'] }] }]) ?? '',
    /must be a single integer/,
  );
  assert.match(
    check([{ matchExpressions: [{ key: 'zone', operator: 'Near', values: [] }] }]) ?? '',
    /not a valid/,
  );
});
