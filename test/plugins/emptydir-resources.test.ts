// emptyDir sizing from the pod's resources, as kubelet computes it:
// getPageSizeMountOption for HugePages media, ResourceConfigForPod (pod-level
// resources, sidecars, overhead, QoS) for the tmpfs size of a Memory medium.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { emptyDirMemorySize, pageSizeMountOption } from '../../src/plugins/emptydir.ts';
import { formatQuantity, parseQuantity } from '../../src/plugins/util/quantity.ts';
import { podCgroupMemoryLimit, podQOS } from '../../src/plugins/util/resources.ts';
import type { VolumeHost } from '../../src/volumehost/types.ts';
import { VolumeError } from '../../src/volumehost/volume.ts';

const Mi = 1024n * 1024n;
const Gi = 1024n * Mi;

type Res = { requests?: Record<string, string>; limits?: Record<string, string> };
const ctr = (name: string, resources?: Res, restartPolicy?: string): V1Container => ({
  name,
  image: 'i',
  ...(resources ? { resources } : {}),
  ...(restartPolicy ? { restartPolicy } : {}),
});
const podOf = (spec: Partial<NonNullable<V1Pod['spec']>>, status?: V1Pod['status']): V1Pod => ({
  metadata: { name: 'p', namespace: 'default', uid: 'u' },
  spec: { containers: [], ...spec },
  ...(status ? { status } : {}),
});

const rejects = (fn: () => unknown, reason: string, message: string) =>
  assert.throws(fn, (err) => {
    assert.ok(err instanceof VolumeError);
    assert.equal(err.reason, reason);
    assert.equal(err.message, message);
    return true;
  });

test('HugePages-<size> needs a request of that very size; the message names the medium', () => {
  const pod = podOf({ containers: [ctr('a', { requests: { 'hugepages-2Mi': '4Mi' } })] });
  assert.equal(pageSizeMountOption('HugePages-2Mi', pod), 'pagesize=2Mi');
  rejects(
    () => pageSizeMountOption('HugePages-1Gi', pod),
    'HugePagesNotRequested',
    'medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages',
  );
});

test('page sizes compare as quantities and print canonically (2048Ki is 2Mi)', () => {
  const pod = podOf({ containers: [ctr('a', { requests: { 'hugepages-2048Ki': '4Mi' } })] });
  assert.equal(pageSizeMountOption('HugePages-2Mi', pod), 'pagesize=2Mi');
  assert.equal(pageSizeMountOption('HugePages', pod), 'pagesize=2Mi');
});

test('HugePages takes the single requested size; none or several are errors with kubelet words', () => {
  rejects(
    () => pageSizeMountOption('HugePages', podOf({ containers: [ctr('a')] })),
    'HugePagesNotRequested',
    'medium HugePages: hugePages storage requested, but there is no resource request for huge pages',
  );
  const two = podOf({
    containers: [ctr('a', { requests: { 'hugepages-2Mi': '2Mi' } })],
    initContainers: [ctr('i', { requests: { 'hugepages-1Gi': '1Gi' } })],
  });
  rejects(
    () => pageSizeMountOption('HugePages', two),
    'HugePagesMultipleSizes',
    "medium: HugePages can't be used if container requests multiple huge page sizes",
  );
  // Both sizes requested: a sized medium picks its own.
  assert.equal(pageSizeMountOption('HugePages-1Gi', two), 'pagesize=1Gi');
});

test('only requests count, as in kubelet (a raw pod with hugepages limits alone has none)', () => {
  const pod = podOf({ containers: [ctr('a', { limits: { 'hugepages-2Mi': '4Mi' } })] });
  rejects(
    () => pageSizeMountOption('HugePages-2Mi', pod),
    'HugePagesNotRequested',
    'medium HugePages-2Mi: hugePages storage requested, but there is no resource request for huge pages',
  );
});

test('pod-level hugepages requests (spec.resources) count', () => {
  const pod = podOf({
    resources: { requests: { 'hugepages-1Gi': '2Gi', memory: '3Gi' }, limits: { memory: '3Gi' } },
    containers: [ctr('a')],
  });
  assert.equal(pageSizeMountOption('HugePages', pod), 'pagesize=1Gi');
  assert.equal(pageSizeMountOption('HugePages-1Gi', pod), 'pagesize=1Gi');
});

test('an unparseable size in the medium is reported with the quantity parser words', () => {
  rejects(
    () => pageSizeMountOption('HugePages-huge', podOf({ containers: [] })),
    'InvalidHugePagesMedium',
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
  );
});

test('the pod memory limit: app containers and sidecars add up, each init container adds the sidecars before it', () => {
  const pod = podOf({
    initContainers: [
      ctr('sidecar', { limits: { memory: '100Mi' } }, 'Always'),
      ctr('init', { limits: { memory: '200Mi' } }),
    ],
    containers: [ctr('app', { limits: { memory: '50Mi' } })],
  });
  // app 50 + sidecar 100 = 150; init 200 runs next to the sidecar: 300.
  assert.equal(podCgroupMemoryLimit(pod), 300n * Mi);
});

test('an init container without a memory limit still has one when a sidecar before it has', () => {
  const pod = podOf({
    initContainers: [
      ctr('sidecar', { limits: { memory: '100Mi' } }, 'Always'),
      ctr('init', { limits: { cpu: '1' } }),
    ],
    containers: [ctr('app', { limits: { memory: '50Mi' } })],
  });
  assert.equal(podCgroupMemoryLimit(pod), 150n * Mi);
  const before = podOf({
    initContainers: [
      ctr('init', { limits: { cpu: '1' } }),
      ctr('sidecar', { limits: { memory: '100Mi' } }, 'Always'),
    ],
    containers: [ctr('app', { limits: { memory: '50Mi' } })],
  });
  assert.equal(podCgroupMemoryLimit(before), undefined, 'the init container before the sidecar has none');
});

test('one container without a memory limit leaves a burstable pod without one; best effort never has one', () => {
  const pod = podOf({
    containers: [ctr('a', { limits: { memory: '50Mi' } }), ctr('b', { requests: { cpu: '100m' } })],
  });
  assert.equal(podQOS(pod), 'Burstable');
  assert.equal(podCgroupMemoryLimit(pod), undefined);
  assert.equal(podCgroupMemoryLimit(podOf({ containers: [ctr('a')] })), undefined);
});

test('pod-level resources: the pod-level memory limit replaces the containers', () => {
  const podLevel = podOf({
    resources: { limits: { memory: '1Gi' }, requests: { memory: '512Mi' } },
    containers: [ctr('a'), ctr('b', { limits: { memory: '4Gi' } })],
  });
  assert.equal(podQOS(podLevel), 'Burstable');
  assert.equal(podCgroupMemoryLimit(podLevel), Gi);
  const guaranteed = podOf({
    resources: { limits: { memory: '1Gi', cpu: '1' }, requests: { memory: '1Gi', cpu: '1' } },
    containers: [ctr('a')],
  });
  assert.equal(podQOS(guaranteed), 'Guaranteed');
  assert.equal(podCgroupMemoryLimit(guaranteed), Gi);
});

test('overhead is added to a non-zero memory limit; the API server QoS class is trusted', () => {
  const pod = podOf(
    {
      overhead: { memory: '10Mi' },
      containers: [
        ctr('a', { limits: { memory: '100Mi', cpu: '1' }, requests: { memory: '100Mi', cpu: '1' } }),
      ],
    },
    { qosClass: 'Guaranteed' },
  );
  assert.equal(podCgroupMemoryLimit(pod), 110n * Mi);
});

test('tmpfs size: node allocatable, then the pod cgroup limit, then sizeLimit, each only when smaller', () => {
  const host = { getNodeAllocatable: () => ({ memory: '8Gi' }) } as unknown as VolumeHost;
  const pod = podOf({ resources: { limits: { memory: '1Gi' } }, containers: [ctr('a')] });
  assert.equal(emptyDirMemorySize(host, pod, undefined), Gi);
  assert.equal(emptyDirMemorySize(host, pod, '256Mi'), 256n * Mi);
  assert.equal(emptyDirMemorySize(host, pod, '2Gi'), Gi);
  assert.equal(emptyDirMemorySize(host, podOf({ containers: [ctr('a')] }), undefined), 8n * Gi);
});

test('Quantity.String() canonical forms', () => {
  const f = (s: string) => formatQuantity(parseQuantity(s));
  assert.equal(f('2048Ki'), '2Mi');
  assert.equal(f('1048576Ki'), '1Gi');
  assert.equal(f('1536'), '1536');
  assert.equal(f('2000000'), '2M');
  assert.equal(f('1500m'), '1500m');
  assert.equal(f('0.5'), '500m');
  assert.equal(f('512Ki'), '512Ki');
  assert.equal(f('1000Ki'), '1000Ki');
  assert.equal(f('0'), '0');
});
