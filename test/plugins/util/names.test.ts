import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  isDNS1123Label,
  isQualifiedName,
  validateDNS1123Label,
  validateQualifiedName,
} from '../../../src/plugins/util/names.ts';
import { escapeQualifiedName, unescapeQualifiedName } from '../../../src/volumehost/paths.ts';

const LABEL_REGEX_ERR =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_ERR =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

describe('escapeQualifiedName', () => {
  test('turns every slash into a tilde and back', () => {
    assert.equal(escapeQualifiedName('kubernetes.io/empty-dir'), 'kubernetes.io~empty-dir');
    assert.equal(escapeQualifiedName('a/b/c'), 'a~b~c');
    assert.equal(unescapeQualifiedName('kubernetes.io~configmap'), 'kubernetes.io/configmap');
    assert.equal(unescapeQualifiedName(escapeQualifiedName('kubernetes.io/csi')), 'kubernetes.io/csi');
  });
});

describe('DNS-1123 labels (volume names)', () => {
  test('accepts lowercase alphanumerics and inner dashes up to 63 bytes', () => {
    for (const ok of ['a', 'cache', 'my-vol-1', '0', '123-abc', 'a'.repeat(63)]) {
      assert.deepEqual(validateDNS1123Label(ok), [], ok);
      assert.equal(isDNS1123Label(ok), true);
    }
  });

  test('rejects with apimachinery messages', () => {
    assert.deepEqual(validateDNS1123Label('My-Vol'), [LABEL_REGEX_ERR]);
    assert.deepEqual(validateDNS1123Label(''), [LABEL_REGEX_ERR]);
    assert.deepEqual(validateDNS1123Label('-a'), [LABEL_REGEX_ERR]);
    assert.deepEqual(validateDNS1123Label('a-'), [LABEL_REGEX_ERR]);
    assert.deepEqual(validateDNS1123Label('a.b'), ['must not contain dots']);
    assert.deepEqual(validateDNS1123Label('a'.repeat(64)), ['must be no more than 63 characters']);
    assert.deepEqual(validateDNS1123Label('A'.repeat(64)), [
      'must be no more than 63 characters',
      LABEL_REGEX_ERR,
    ]);
    assert.equal(isDNS1123Label('a_b'), false);
  });
});

describe('qualified names (label and annotation keys)', () => {
  test('accepts names with an optional DNS subdomain prefix', () => {
    for (const ok of [
      'app',
      'App.Name_1',
      'example.com/MyName',
      'a/b',
      'k8s.io/x-y',
      `p/${'n'.repeat(63)}`,
    ]) {
      assert.deepEqual(validateQualifiedName(ok), [], ok);
      assert.equal(isQualifiedName(ok), true);
    }
  });

  test('reports each broken part', () => {
    assert.deepEqual(validateQualifiedName(''), ['name part must be non-empty', NAME_PART_ERR]);
    assert.deepEqual(validateQualifiedName('/a'), ['prefix part must be non-empty']);
    assert.deepEqual(validateQualifiedName('a/'), ['name part must be non-empty', NAME_PART_ERR]);
    assert.deepEqual(validateQualifiedName('-a'), [NAME_PART_ERR]);
    assert.deepEqual(validateQualifiedName('n'.repeat(64)), ['name part must be no more than 63 characters']);
    assert.deepEqual(validateQualifiedName('Example.com/a'), [
      "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ]);
    assert.deepEqual(validateQualifiedName('a/b/c'), [
      "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ]);
  });
});
