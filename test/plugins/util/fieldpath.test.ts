import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import {
  collectDownwardAPIData,
  extractFieldPathAsString,
  extractResourceValue,
  formatMap,
  goQuote,
  splitMaybeSubscriptedPath,
} from '../../../src/plugins/util/fieldpath.ts';

const pod: V1Pod = {
  metadata: {
    name: 'web-0',
    namespace: 'shop',
    uid: '5f1c2e9a-0000-4000-8000-000000000001',
    labels: { app: 'web', tier: 'front' },
    annotations: { 'Example.com/Key': 'v1', note: 'multi\nline' },
  },
  spec: {
    nodeName: 'node-a',
    containers: [
      {
        name: 'c1',
        resources: {
          limits: { cpu: '500m', memory: '64Mi', 'hugepages-2Mi': '4Mi' },
          requests: { cpu: '250m', memory: '32Mi', 'hugepages-2Mi': '4Mi' },
        },
      },
      { name: 'c2' },
      { name: 'c3', resources: { limits: { cpu: '0', memory: '1G' } } },
    ],
    initContainers: [{ name: 'init', resources: { limits: { cpu: '2' } } }],
  },
};
const allocatable = { cpu: '4', memory: '8Gi', 'ephemeral-storage': '10Gi', 'hugepages-2Mi': '1Gi' };

describe('goQuote / formatMap', () => {
  test('quotes like Go strconv.Quote', () => {
    assert.equal(goQuote('plain'), '"plain"');
    assert.equal(goQuote('x"y\\z'), '"x\\"y\\\\z"');
    assert.equal(goQuote('a\nb\tc\rd'), '"a\\nb\\tc\\rd"');
    assert.equal(goQuote('\x07\b\f\v'), '"\\a\\b\\f\\v"');
    assert.equal(goQuote('\x00\x1b\x7f'), '"\\x00\\x1b\\x7f"');
    assert.equal(goQuote('naïve ☃ 日本 😀'), '"naïve ☃ 日本 😀"');
    assert.equal(goQuote('\u00a0\u00ad\u200b\u2028\ue000'), '"\\u00a0\\u00ad\\u200b\\u2028\\ue000"');
    assert.equal(goQuote('\u{e0001}'), '"\\U000e0001"');
    assert.equal(goQuote('\ud800'), '"\ufffd"');
  });

  test('formats sorted key="value" lines without a trailing newline', () => {
    const out = formatMap({
      tier: 'front',
      app: 'say "hi"\nbye',
      Zed: '',
      '😀': 'emoji',
      ｆ: 'fullwidth',
    });
    // Keys sort by UTF-8 bytes: U+FF46 (EF BD 86) comes before U+1F600 (F0 9F 98 80).
    assert.equal(out, 'Zed=""\napp="say \\"hi\\"\\nbye"\ntier="front"\nｆ="fullwidth"\n😀="emoji"');
    assert.equal(formatMap({}), '');
    assert.equal(formatMap(undefined), '');
  });
});

describe('extractFieldPathAsString', () => {
  test('supports the metadata paths kubelet allows in volumes', () => {
    assert.equal(extractFieldPathAsString(pod, 'metadata.name'), 'web-0');
    assert.equal(extractFieldPathAsString(pod, 'metadata.namespace'), 'shop');
    assert.equal(extractFieldPathAsString(pod, 'metadata.uid'), '5f1c2e9a-0000-4000-8000-000000000001');
    assert.equal(extractFieldPathAsString(pod, 'metadata.labels'), 'app="web"\ntier="front"');
    assert.equal(
      extractFieldPathAsString(pod, 'metadata.annotations'),
      'Example.com/Key="v1"\nnote="multi\\nline"',
    );
    assert.equal(extractFieldPathAsString({}, 'metadata.labels'), '');
  });

  test('subscripts return single raw values', () => {
    assert.equal(extractFieldPathAsString(pod, "metadata.labels['app']"), 'web');
    assert.equal(extractFieldPathAsString(pod, "metadata.labels['missing']"), '');
    assert.equal(extractFieldPathAsString(pod, "metadata.annotations['note']"), 'multi\nline');
    // Annotation keys are validated lower-cased, so an upper-case prefix is fine there.
    assert.equal(extractFieldPathAsString(pod, "metadata.annotations['Example.com/Key']"), 'v1');
  });

  test('errors carry kubelet messages', () => {
    assert.throws(() => extractFieldPathAsString(pod, "metadata.labels['Example.com/Key']"), {
      message:
        "invalid key subscript in metadata.labels['Example.com/Key']: prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    });
    assert.throws(() => extractFieldPathAsString(pod, "metadata.labels['']"), {
      message:
        "invalid key subscript in metadata.labels['']: name part must be non-empty;name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    });
    assert.throws(() => extractFieldPathAsString(pod, "metadata.name['x']"), {
      message: `fieldPath "metadata.name['x']" does not support subscript`,
    });
    for (const envOnly of ['status.podIP', 'status.podIPs', 'spec.hostname']) {
      assert.throws(() => extractFieldPathAsString(pod, envOnly), {
        message: `unsupported fieldPath: ${envOnly}`,
      });
    }
  });

  test('splitMaybeSubscriptedPath follows the upstream examples', () => {
    assert.deepEqual(splitMaybeSubscriptedPath("metadata.annotations['myKey']"), [
      'metadata.annotations',
      'myKey',
    ]);
    assert.deepEqual(splitMaybeSubscriptedPath("metadata.annotations['a[b]c']"), [
      'metadata.annotations',
      'a[b]c',
    ]);
    assert.deepEqual(splitMaybeSubscriptedPath("metadata.labels['']"), ['metadata.labels', '']);
    assert.equal(splitMaybeSubscriptedPath('metadata.labels'), undefined);
    assert.equal(splitMaybeSubscriptedPath("['x']"), undefined);
  });
});

describe('extractResourceValue', () => {
  const get = (resource: string, containerName: string, divisor?: string) =>
    extractResourceValue({ resource, divisor }, pod, containerName, allocatable);

  test('cpu is compared in millicores and rounded up to whole divisors', () => {
    assert.equal(get('limits.cpu', 'c1'), '1');
    assert.equal(get('limits.cpu', 'c1', '1m'), '500');
    assert.equal(get('limits.cpu', 'c1', '1'), '1');
    assert.equal(get('requests.cpu', 'c1', '1m'), '250');
    assert.equal(get('requests.cpu', 'c1'), '1');
    assert.equal(get('limits.cpu', 'init', '1m'), '2000');
  });

  test('memory, ephemeral storage and hugepages in whole divisor units', () => {
    assert.equal(get('limits.memory', 'c1', '1Mi'), '64');
    assert.equal(get('limits.memory', 'c1'), '67108864');
    assert.equal(get('limits.memory', 'c1', '1M'), '68'); // 67.108864 rounds up
    assert.equal(get('requests.memory', 'c1', '1Mi'), '32');
    assert.equal(get('limits.hugepages-2Mi', 'c1', '1Mi'), '4');
    assert.equal(get('requests.hugepages-2Mi', 'c1', '1Ki'), '4096');
  });

  test('unset or zero limits default to node allocatable, requests do not', () => {
    assert.equal(get('limits.cpu', 'c2', '1m'), '4000');
    assert.equal(get('limits.memory', 'c2', '1Gi'), '8');
    assert.equal(get('limits.ephemeral-storage', 'c1', '1Gi'), '10');
    assert.equal(get('limits.cpu', 'c3'), '4'); // cpu limit "0"
    assert.equal(get('limits.memory', 'c3', '1M'), '1000');
    assert.equal(get('requests.cpu', 'c2'), '0');
    assert.equal(get('requests.memory', 'c2'), '0');
    // Hugepages are never overcommitted, so allocatable is not a fallback.
    assert.equal(get('limits.hugepages-2Mi', 'c2'), '0');
  });

  test('with pod-level limits (spec.resources), an unset container limit is the pod limit, then node allocatable', () => {
    const withPodLimits =
      (limits: Record<string, string>, nodeAllocatable: Record<string, string> = allocatable) =>
      (resource: string, containerName: string, divisor?: string) =>
        extractResourceValue(
          { resource, divisor },
          { ...pod, spec: { ...pod.spec, containers: pod.spec?.containers ?? [], resources: { limits } } },
          containerName,
          nodeAllocatable,
        );
    const g = withPodLimits({ cpu: '1500m', memory: '2Gi', 'ephemeral-storage': '1Gi' });
    // c2 sets no limits: the pod's, not the node's.
    assert.equal(g('limits.cpu', 'c2', '1m'), '1500');
    assert.equal(g('limits.memory', 'c2', '1Mi'), '2048');
    // ephemeral-storage is not a pod-level resource: node allocatable.
    assert.equal(g('limits.ephemeral-storage', 'c2', '1Gi'), '10');
    // A zero container limit counts as unset; a container limit always wins.
    assert.equal(g('limits.cpu', 'c3', '1m'), '1500');
    assert.equal(g('limits.memory', 'c3', '1M'), '1000');
    assert.equal(g('limits.cpu', 'c1', '1m'), '500');
    // Init containers too; requests are never defaulted.
    assert.equal(g('limits.memory', 'init', '1Mi'), '2048');
    assert.equal(g('requests.memory', 'c2'), '0');
    // Only the pod-level limits that are set and non-zero count, resource by resource.
    const memOnly = withPodLimits({ memory: '3Gi', cpu: '0' });
    assert.equal(memOnly('limits.memory', 'c2', '1Gi'), '3');
    assert.equal(memOnly('limits.cpu', 'c2'), '4');
    // Pod-level requests alone change nothing (IsPodLevelLimitsSet).
    const requestsOnly = extractResourceValue(
      { resource: 'limits.memory', divisor: '1Gi' },
      {
        ...pod,
        spec: {
          ...pod.spec,
          containers: pod.spec?.containers ?? [],
          resources: { requests: { memory: '1Gi' } },
        },
      },
      'c2',
      allocatable,
    );
    assert.equal(requestsOnly, '8');
    // As kubelet's loop: a pod limit only stands in for a resource node allocatable names.
    const noNodeMemory = withPodLimits({ memory: '2Gi', cpu: '2' }, { cpu: '4' });
    assert.equal(noNodeMemory('limits.memory', 'c2'), '0');
    assert.equal(noNodeMemory('limits.cpu', 'c2'), '2');
  });

  test('a zero divisor means 1', () => {
    assert.equal(get('limits.cpu', 'c1', '0'), '1');
  });

  test('errors', () => {
    assert.throws(() => get('limits.cpu', 'nope'), { message: 'container nope not found' });
    assert.throws(() => get('limits.foo', 'c1'), { message: 'unsupported container resource : limits.foo' });
    assert.throws(() => get('limits.cpu', 'c1', 'lots'), /divisor: invalid quantity "lots"/);
  });
});

describe('collectDownwardAPIData', () => {
  test('builds the payload with cleaned paths, item modes and collected errors', () => {
    const { payload, errors } = collectDownwardAPIData(
      [
        { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
        { path: './dir//name', mode: 0o400, fieldRef: { fieldPath: 'metadata.name' } },
        {
          path: 'cpu_limit',
          resourceFieldRef: { containerName: 'c1', resource: 'limits.cpu', divisor: '1m' },
        },
        { path: 'node', fieldRef: { fieldPath: 'status.podIP' } },
        { path: 'orphan', resourceFieldRef: { resource: 'limits.cpu' } },
      ],
      pod,
      allocatable,
      0o644,
      undefined,
    );
    assert.deepEqual(
      [...payload.entries()],
      [
        ['labels', { data: 'app="web"\ntier="front"', mode: 0o644 }],
        ['dir/name', { data: 'web-0', mode: 0o400 }],
        ['cpu_limit', { data: '500', mode: 0o644 }],
        ['node', { data: '', mode: 0o644 }],
        ['orphan', { data: '', mode: 0o644 }],
      ],
    );
    assert.deepEqual(errors, ['unsupported fieldPath: status.podIP', 'container  not found']);
  });
});
