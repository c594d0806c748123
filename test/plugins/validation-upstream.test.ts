// Admission parity: the valid and invalid inputs of the upstream validation
// tests (k/k pkg/apis/core/validation/validation_test.go: TestValidateVolumes,
// the downward API and projection cases, validateContainerResourceDivisor)
// for every field podvol checks, written as the v1 JSON a client sends. A
// volume the API server admits must raise no problem that fails a static pod
// (nodeOnly ones only fail that volume on this node); one it rejects must be
// reported on the same field.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { validatePodVolumes } from '../../src/plugins/validation.ts';
import { validationPod } from './harness.ts';

type Volume = Record<string, unknown>;
interface Case {
  name: string;
  volume: Volume;
  /** Extra volumeMounts fields for a mount of this volume (subPath). */
  mount?: Record<string, unknown>;
  /** Invalid cases: the field path and a fragment of the detail upstream reports. */
  error?: { field: string; detail?: string };
}

function podWith(c: Case): V1Pod {
  return validationPod(
    {
      name: 'test-container',
      image: 'i',
      volumeMounts: [{ name: String(c.volume.name ?? 'x'), mountPath: '/m', ...c.mount }],
    },
    [c.volume],
  );
}

const emptyDir = (name: string, extra: Volume = {}) => ({ name, emptyDir: {}, ...extra });
const fieldRef = (fieldPath: string) => ({ apiVersion: 'v1', fieldPath });
const downward = (items: Volume[], extra: Volume = {}) => ({
  name: 'downapi',
  downwardAPI: { items, ...extra },
});
const resourceRef = (resource: string, divisor?: string) => ({
  path: 'r',
  resourceFieldRef: {
    containerName: 'test-container',
    resource,
    ...(divisor === undefined ? {} : { divisor }),
  },
});

const valid: Case[] = [
  { name: 'valid alpha name', volume: emptyDir('empty') },
  { name: 'valid num name', volume: emptyDir('123') },
  { name: 'valid alphanum name', volume: emptyDir('empty-123') },
  { name: 'valid numalpha name', volume: emptyDir('123-empty') },
  {
    name: 'default HostPath',
    volume: { name: 'hostpath', hostPath: { path: '/mnt/path', type: 'Directory' } },
  },
  { name: 'valid HostPath', volume: { name: 'hostpath', hostPath: { path: '/mnt/path', type: 'Socket' } } },
  {
    name: 'relative HostPath (no absolute-path rule upstream)',
    volume: { name: 'h', hostPath: { path: 'mnt', type: '' } },
  },
  { name: 'valid Secret', volume: { name: 'secret', secret: { secretName: 'my-secret' } } },
  {
    name: 'valid Secret with defaultMode',
    volume: { name: 'secret', secret: { secretName: 'my-secret', defaultMode: 0o644 } },
  },
  {
    name: 'valid Secret with projection and mode',
    volume: {
      name: 'secret',
      secret: { secretName: 'my-secret', items: [{ key: 'key', path: 'filename', mode: 0o644 }] },
    },
  },
  {
    name: 'valid Secret with subdir projection',
    volume: {
      name: 'secret',
      secret: { secretName: 'my-secret', items: [{ key: 'key', path: 'dir/filename' }] },
    },
  },
  { name: 'valid ConfigMap', volume: { name: 'cfgmap', configMap: { name: 'my-cfgmap' } } },
  {
    name: 'valid ConfigMap with defaultMode',
    volume: { name: 'cfgmap', configMap: { name: 'my-cfgmap', defaultMode: 0o644 } },
  },
  {
    name: 'valid ConfigMap with projection and mode',
    volume: {
      name: 'cfgmap',
      configMap: { name: 'my-cfgmap', items: [{ key: 'key', path: 'filename', mode: 0o644 }] },
    },
  },
  {
    name: 'valid DownwardAPI',
    volume: downward([
      { path: 'labels', fieldRef: fieldRef('metadata.labels') },
      { path: 'labels with subscript', fieldRef: fieldRef("metadata.labels['key']") },
      {
        path: 'labels with complex subscript',
        fieldRef: fieldRef("metadata.labels['test.example.com/key']"),
      },
      { path: 'annotations', fieldRef: fieldRef('metadata.annotations') },
      { path: 'annotations with subscript', fieldRef: fieldRef("metadata.annotations['key']") },
      {
        path: 'annotations with complex subscript',
        fieldRef: fieldRef("metadata.annotations['TEST.EXAMPLE.COM/key']"),
      },
      { path: 'namespace', fieldRef: fieldRef('metadata.namespace') },
      { path: 'name', fieldRef: fieldRef('metadata.name') },
      { path: 'path/with/subdirs', fieldRef: fieldRef('metadata.labels') },
      { path: 'path/./withdot', fieldRef: fieldRef('metadata.labels') },
      { path: 'path/with/embedded..dotdot', fieldRef: fieldRef('metadata.labels') },
      { path: 'path/with/leading/..dotdot', fieldRef: fieldRef('metadata.labels') },
      { ...resourceRef('limits.cpu'), path: 'cpu_limit' },
      { ...resourceRef('requests.cpu'), path: 'cpu_request' },
      { ...resourceRef('limits.memory'), path: 'memory_limit' },
      { ...resourceRef('requests.memory'), path: 'memory_request' },
    ]),
  },
  { name: 'downapi valid defaultMode', volume: downward([], { defaultMode: 0o644 }) },
  {
    name: 'downapi valid item mode',
    volume: downward([{ mode: 0o644, path: 'path', fieldRef: fieldRef('metadata.labels') }]),
  },
  // client-go's typed ResourceFieldSelector always serializes its zero Divisor as "0",
  // and the API server returns it that way: an unset divisor.
  {
    name: 'divisor "0" (client-go typed struct, kubectl get -o yaml)',
    volume: downward([resourceRef('limits.cpu', '0')]),
  },
  { name: 'cpu divisor 1m', volume: downward([resourceRef('limits.cpu', '1m')]) },
  { name: 'cpu divisor 1000m is 1', volume: downward([resourceRef('requests.cpu', '1000m')]) },
  { name: 'memory divisor 1Mi', volume: downward([resourceRef('limits.memory', '1Mi')]) },
  { name: 'memory divisor 1000 is 1k', volume: downward([resourceRef('requests.memory', '1000')]) },
  {
    name: 'ephemeral-storage divisor 1Ki',
    volume: downward([resourceRef('limits.ephemeral-storage', '1Ki')]),
  },
  { name: 'hugepages divisor 1Gi', volume: downward([resourceRef('requests.hugepages-1Gi', '1Gi')]) },
  { name: 'emptyDir sizeLimit 0', volume: emptyDir('e', { emptyDir: { sizeLimit: '0' } }) },
  // The API server does not validate the medium; kubelet's SetUp fails an unknown one.
  { name: 'emptyDir with any medium', volume: emptyDir('e', { emptyDir: { medium: 'memory' } }) },
  {
    name: 'emptyDir sizeLimit beyond int64 bytes',
    volume: emptyDir('e', { emptyDir: { sizeLimit: '100Ei' } }),
  },
  {
    name: 'projected token next to a configMap item of the same path (tokens are not path-checked upstream)',
    volume: {
      name: 'proj',
      projected: {
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
          { configMap: { name: 'c', items: [{ key: 'k', path: 'token' }] } },
        ],
      },
    },
  },
  {
    name: 'projected with every common source',
    volume: {
      name: 'proj',
      projected: {
        defaultMode: 0o644,
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 600 } },
          { secret: { name: 's', items: [{ key: 'k', path: 's' }] } },
          { downwardAPI: { items: [{ path: 'labels', fieldRef: fieldRef('metadata.labels') }] } },
        ],
      },
    },
  },
  {
    name: 'image volume',
    volume: { name: 'img', image: { reference: 'quay.io/x/y:v1', pullPolicy: 'IfNotPresent' } },
  },
  { name: 'subPath', volume: emptyDir('e'), mount: { subPath: 'a/b' } },
  { name: 'subPath with embedded dots', volume: emptyDir('e'), mount: { subPath: 'a..b/c' } },
];

const invalid: Case[] = [
  {
    name: 'zero-length name',
    volume: emptyDir(''),
    error: { field: 'spec.volumes[0].name', detail: 'Required value' },
  },
  {
    name: 'name > 63 characters',
    volume: emptyDir('a'.repeat(64)),
    error: { field: 'spec.volumes[0].name', detail: 'must be no more than' },
  },
  {
    name: 'name not a DNS label',
    volume: emptyDir('a.b.c'),
    // apimachinery's IsDNS1123Label: a valid subdomain that is not a label "must not contain dots".
    error: { field: 'spec.volumes[0].name', detail: 'must not contain dots' },
  },
  {
    name: 'more than one source',
    volume: { name: 'dups', emptyDir: {}, hostPath: { path: '/mnt/path', type: 'Directory' } },
    error: { field: 'spec.volumes[0]', detail: 'may not specify more than 1 volume type' },
  },
  {
    name: 'invalid HostPath',
    volume: { name: 'hostpath', hostPath: { path: '/mnt/path', type: 'invalid' } },
    error: { field: 'spec.volumes[0].hostPath.type', detail: 'Unsupported value' },
  },
  {
    name: 'invalid HostPath backsteps',
    volume: { name: 'hostpath', hostPath: { path: '/mnt/path/..', type: 'Directory' } },
    error: { field: 'spec.volumes[0].hostPath.path', detail: "must not contain '..'" },
  },
  {
    name: 'secret without a name',
    volume: { name: 'secret', secret: {} },
    error: { field: 'spec.volumes[0].secret.secretName', detail: 'Required value' },
  },
  {
    name: 'secret with missing path',
    volume: { name: 'secret', secret: { secretName: 's', items: [{ key: 'key', path: '' }] } },
    error: { field: 'spec.volumes[0].secret.items[0].path', detail: 'Required value' },
  },
  {
    name: 'secret with leading ..',
    volume: { name: 'secret', secret: { secretName: 's', items: [{ key: 'key', path: '../foo' }] } },
    error: { field: 'spec.volumes[0].secret.items[0].path' },
  },
  {
    name: 'secret with .. inside',
    volume: { name: 'secret', secret: { secretName: 's', items: [{ key: 'key', path: 'foo/../bar' }] } },
    error: { field: 'spec.volumes[0].secret.items[0].path' },
  },
  {
    name: 'secret with invalid positive defaultMode',
    volume: { name: 'secret', secret: { secretName: 's', defaultMode: 0o1000 } },
    error: { field: 'spec.volumes[0].secret.defaultMode' },
  },
  {
    name: 'secret with invalid negative defaultMode',
    volume: { name: 'secret', secret: { secretName: 's', defaultMode: -1 } },
    error: { field: 'spec.volumes[0].secret.defaultMode' },
  },
  {
    name: 'configmap without a name',
    volume: { name: 'cfgmap', configMap: { items: [] } },
    error: { field: 'spec.volumes[0].configMap.name', detail: 'Required value' },
  },
  {
    name: 'configmap with missing path',
    volume: { name: 'cfgmap', configMap: { name: 'c', items: [{ key: 'key', path: '' }] } },
    error: { field: 'spec.volumes[0].configMap.items[0].path', detail: 'Required value' },
  },
  {
    name: 'configmap with leading ..',
    volume: { name: 'cfgmap', configMap: { name: 'c', items: [{ key: 'key', path: '../foo' }] } },
    error: { field: 'spec.volumes[0].configMap.items[0].path' },
  },
  {
    name: 'configmap with .. inside',
    volume: { name: 'cfgmap', configMap: { name: 'c', items: [{ key: 'key', path: 'foo/../bar' }] } },
    error: { field: 'spec.volumes[0].configMap.items[0].path' },
  },
  {
    name: 'configmap with invalid positive defaultMode',
    volume: { name: 'cfgmap', configMap: { name: 'c', defaultMode: 0o1000 } },
    error: { field: 'spec.volumes[0].configMap.defaultMode' },
  },
  {
    name: 'configmap with invalid negative defaultMode',
    volume: { name: 'cfgmap', configMap: { name: 'c', defaultMode: -1 } },
    error: { field: 'spec.volumes[0].configMap.defaultMode' },
  },
  {
    name: 'downapi invalid positive item mode',
    volume: downward([{ mode: 0o1000, path: 'path', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].mode' },
  },
  {
    name: 'downapi invalid negative item mode',
    volume: downward([{ mode: -1, path: 'path', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].mode' },
  },
  {
    name: 'downapi empty metatada path',
    volume: downward([{ path: '', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].path', detail: 'Required value' },
  },
  {
    name: 'downapi absolute path',
    volume: downward([{ path: '/absolutepath', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].path' },
  },
  {
    name: 'downapi dot dot path',
    volume: downward([{ path: '../../passwd', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].path', detail: "must not contain '..'" },
  },
  {
    name: 'downapi dot dot file name',
    volume: downward([{ path: '..badFileName', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].path', detail: "must not start with '..'" },
  },
  {
    name: 'downapi dot dot first level dirent',
    volume: downward([{ path: '..badDirName/goodFileName', fieldRef: fieldRef('metadata.labels') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].path', detail: "must not start with '..'" },
  },
  {
    name: 'downapi fieldRef and ResourceFieldRef together',
    volume: downward([
      {
        path: 'test',
        fieldRef: fieldRef('metadata.labels'),
        resourceFieldRef: { containerName: 'test-container', resource: 'requests.memory' },
      },
    ]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0]', detail: 'can not be specified simultaneously' },
  },
  {
    name: 'downapi invalid positive defaultMode',
    volume: downward([], { defaultMode: 0o1000 }),
    error: { field: 'spec.volumes[0].downwardAPI.defaultMode' },
  },
  {
    name: 'downapi invalid negative defaultMode',
    volume: downward([], { defaultMode: -1 }),
    error: { field: 'spec.volumes[0].downwardAPI.defaultMode' },
  },
  {
    name: 'downapi unsupported fieldPath (status.podIP is for env only)',
    volume: downward([{ path: 'ip', fieldRef: fieldRef('status.podIP') }]),
    error: { field: 'spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath', detail: 'Unsupported value' },
  },
  {
    name: 'resourceFieldRef without containerName (volumes need one)',
    volume: downward([{ path: 'r', resourceFieldRef: { resource: 'limits.cpu' } }]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName',
      detail: 'Required value',
    },
  },
  {
    name: 'resourceFieldRef with an unsupported resource',
    volume: downward([resourceRef('limits.gpu')]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.resource',
      detail: 'Unsupported value',
    },
  },
  {
    name: 'cpu divisor 1Mi',
    volume: downward([resourceRef('limits.cpu', '1Mi')]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor',
      detail: '1m and 1 are supported',
    },
  },
  {
    name: 'memory divisor 1m',
    volume: downward([resourceRef('limits.memory', '1m')]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor',
      detail: 'memory resource',
    },
  },
  {
    name: 'memory divisor 1024 (canonically "1024", not "1Ki")',
    volume: downward([resourceRef('requests.memory', '1024')]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor',
      detail: 'memory resource',
    },
  },
  {
    name: 'ephemeral-storage divisor 1m',
    volume: downward([resourceRef('requests.ephemeral-storage', '1m')]),
    error: {
      field: 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor',
      detail: 'ephemeral storage',
    },
  },
  {
    name: 'emptyDir negative sizeLimit',
    volume: emptyDir('e', { emptyDir: { sizeLimit: '-1' } }),
    error: {
      field: 'spec.volumes[0].emptyDir.sizeLimit',
      detail: 'Forbidden: SizeLimit field must be a valid resource quantity',
    },
  },
  {
    name: 'projected token shorter than 10 minutes',
    volume: {
      name: 'proj',
      projected: { sources: [{ serviceAccountToken: { path: 't', expirationSeconds: 599 } }] },
    },
    error: {
      field: 'spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds',
      detail: 'less than 10 minutes',
    },
  },
  {
    name: 'projected token longer than 2^32 seconds',
    volume: {
      name: 'proj',
      projected: { sources: [{ serviceAccountToken: { path: 't', expirationSeconds: 2 ** 32 + 1 } }] },
    },
    error: {
      field: 'spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds',
      detail: 'larger than 2^32',
    },
  },
  {
    name: 'projected sources writing the same path',
    volume: {
      name: 'proj',
      projected: {
        sources: [
          { configMap: { name: 'a', items: [{ key: 'k', path: 'x' }] } },
          { downwardAPI: { items: [{ path: 'x', fieldRef: fieldRef('metadata.name') }] } },
        ],
      },
    },
    error: { field: 'spec.volumes[0].projected', detail: 'conflicting duplicate paths' },
  },
  {
    name: 'projected source with two projections',
    volume: { name: 'proj', projected: { sources: [{ configMap: { name: 'a' }, secret: { name: 'b' } }] } },
    error: { field: 'spec.volumes[0].projected.sources[0]', detail: 'may not specify more than 1' },
  },
  {
    name: 'image volume without a reference',
    volume: { name: 'img', image: { pullPolicy: 'Always' } },
    error: { field: 'spec.volumes[0].image.reference', detail: 'Required value' },
  },
  {
    name: 'image volume with an unknown pull policy',
    volume: { name: 'img', image: { reference: 'x', pullPolicy: 'Sometimes' } },
    error: { field: 'spec.volumes[0].image.pullPolicy', detail: 'Unsupported value' },
  },
  {
    name: 'subPath climbing out of the volume',
    volume: emptyDir('e'),
    mount: { subPath: '../x' },
    error: { field: 'spec.containers[0].volumeMounts[0].subPath', detail: "must not contain '..'" },
  },
  {
    name: 'absolute subPath',
    volume: emptyDir('e'),
    mount: { subPath: '/x' },
    error: { field: 'spec.containers[0].volumeMounts[0].subPath', detail: 'must be a relative path' },
  },
  {
    name: 'volumeMount naming no volume',
    volume: emptyDir('e'),
    mount: { name: 'nope' },
    error: { field: 'spec.containers[0].volumeMounts[0].name', detail: 'Not found: "nope"' },
  },
];

describe('admission parity with the API server (upstream validation test inputs)', () => {
  for (const c of valid) {
    test(`admitted: ${c.name}`, () => {
      const problems = [...validatePodVolumes(podWith(c)).values()].filter((p) => !p.nodeOnly);
      assert.deepEqual(problems, []);
    });
  }
  for (const c of invalid) {
    test(`rejected: ${c.name}`, () => {
      const problems = [...validatePodVolumes(podWith(c)).values()].filter((p) => !p.nodeOnly);
      const { field, detail } = c.error as NonNullable<Case['error']>;
      const messages = problems.flatMap((p) => p.message.split('; '));
      assert.ok(
        messages.some((m) => m.startsWith(`${field}:`) && (detail === undefined || m.includes(detail))),
        `expected an error on ${field}${detail ? ` (${detail})` : ''}, got ${JSON.stringify(messages)}`,
      );
    });
  }
});
