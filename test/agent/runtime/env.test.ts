// The container environment subPathExpr expands against: kubelet's
// expansion rules and env sources.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { containerEnv, expand, expandSubPathExpr } from '../../../src/agent/runtime/env.ts';
import { ApiError } from '../../../src/volumehost/errors.ts';
import type { VolumeHost } from '../../../src/volumehost/types.ts';

test('expand follows third_party/forked/golang/expansion', () => {
  const m = (n: string) => ({ A: 'a', B: 'b' })[n] ?? `$(${n})`;
  assert.equal(expand('$(A)-$(B)', m), 'a-b');
  assert.equal(expand('$$(A)', m), '$(A)');
  assert.equal(expand('$(A', m), '$(A');
  assert.equal(expand('$A$', m), '$A$');
  assert.equal(expand('x$(C)y', m), 'x$(C)y');
  assert.equal(expand('$()', m), '$()');
});

test('expandSubPathExpr lists every missing or empty variable, sorted', () => {
  assert.equal(
    expandSubPathExpr(
      '$(A)/$(B)',
      new Map([
        ['A', 'x'],
        ['B', 'y'],
      ]),
    ),
    'x/y',
  );
  assert.throws(() => expandSubPathExpr('$(Z)/$(A)/$(E)', new Map([['E', '']])), {
    message: 'missing value for A, E, Z',
  });
});

const host = (kube: boolean, objects: Record<string, unknown> = {}) =>
  ({
    getKubeConfig: () => (kube ? {} : undefined),
    getHostIP: () => '192.0.2.7',
    getNodeAllocatable: () => ({ cpu: '4', memory: '8Gi' }),
    getConfigMapFunc: () => async (ns: string, name: string) => {
      const o = objects[`cm/${ns}/${name}`];
      if (!o) throw new ApiError('NotFound', 'not found', { code: 404 });
      return o;
    },
    getSecretFunc: () => async (ns: string, name: string) => {
      const o = objects[`secret/${ns}/${name}`];
      if (!o) throw new ApiError('NotFound', 'not found', { code: 404 });
      return o;
    },
  }) as unknown as VolumeHost;

const pod = {
  metadata: { name: 'web', namespace: 'prod', uid: 'u-1', labels: { app: 'shop' } },
  spec: { nodeName: 'node-a', serviceAccountName: 'sa', containers: [] },
  status: { podIP: '10.1.2.3', podIPs: [{ ip: '10.1.2.3' }, { ip: 'fd00::3' }] },
} as unknown as V1Pod;

test('env values, downward API fields and resources resolve as for kubelet', async () => {
  const c: V1Container = {
    name: 'app',
    resources: { limits: { memory: '64Mi' } },
    env: [
      { name: 'NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'IPS', valueFrom: { fieldRef: { fieldPath: 'status.podIPs' } } },
      { name: 'HOST', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
      { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
      { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
      { name: 'PATHY', value: '$(NS)/$(APP)/$(UNKNOWN)' },
    ],
  };
  const withC = { ...pod, spec: { ...pod.spec, containers: [c] } } as V1Pod;
  const env = await containerEnv(withC, c, host(false));
  assert.deepEqual(Object.fromEntries(env), {
    NS: 'prod',
    NODE: 'node-a',
    IPS: '10.1.2.3,fd00::3',
    HOST: '192.0.2.7',
    APP: 'shop',
    MEM: '64',
    PATHY: 'prod/shop/$(UNKNOWN)',
  });
});

test('resourceFieldRef env of a container without limits: the pod-level limit, then node allocatable', async () => {
  const c: V1Container = {
    name: 'app',
    env: [
      { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
      { name: 'CPU', valueFrom: { resourceFieldRef: { resource: 'limits.cpu', divisor: '1m' } } },
    ],
  };
  const withPodLimits = {
    ...pod,
    spec: { ...pod.spec, containers: [c], resources: { limits: { memory: '512Mi' } } },
  } as V1Pod;
  assert.deepEqual(Object.fromEntries(await containerEnv(withPodLimits, c, host(false))), {
    MEM: '512',
    CPU: '4000',
  });
});

test('configMap and secret references: standalone says there is no API, optional ones are skipped', async () => {
  const c: V1Container = {
    name: 'app',
    env: [{ name: 'K', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k' } } }],
  };
  await assert.rejects(containerEnv(pod, c, host(false)), {
    message: "couldn't get configMap prod/cm, no kubeClient defined",
  });
  const objects = {
    'cm/prod/cm': { data: { k: 'v', other: 'o' } },
    'secret/prod/s': { data: { pw: Buffer.from('hunter2').toString('base64') } },
  };
  const c2: V1Container = {
    name: 'app',
    envFrom: [{ configMapRef: { name: 'cm' }, prefix: 'CM_' }],
    env: [
      { name: 'K', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k' } } },
      { name: 'PW', valueFrom: { secretKeyRef: { name: 's', key: 'pw' } } },
      { name: 'OPT', valueFrom: { secretKeyRef: { name: 'gone', key: 'x', optional: true } } },
    ],
  };
  const env = await containerEnv(pod, c2, host(true, objects));
  assert.deepEqual(Object.fromEntries(env), { CM_k: 'v', CM_other: 'o', K: 'v', PW: 'hunter2' });
  const c3: V1Container = {
    name: 'app',
    env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'cm', key: 'nope' } } }],
  };
  await assert.rejects(containerEnv(pod, c3, host(true, objects)), {
    message: "couldn't find key nope in ConfigMap prod/cm",
  });
});
