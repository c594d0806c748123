// A field path an env var and a downward API volume file both accept renders to
// the same value in both, status.hostIP's fallbacks included: one resolution
// (plugins/util/fieldpath.ts) serves the two.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { containerEnv } from '../../../src/agent/runtime/env.ts';
import { collectDownwardAPIData } from '../../../src/plugins/util/fieldpath.ts';
import type { VolumeHost } from '../../../src/volumehost/types.ts';

const FIELD_PATHS = [
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  'metadata.labels',
  'metadata.annotations',
  "metadata.labels['app']",
  "metadata.annotations['note']",
  'spec.nodeName',
  'spec.serviceAccountName',
  'status.hostIP',
];

const base: V1Pod = {
  metadata: {
    name: 'web',
    namespace: 'prod',
    uid: 'u-1',
    labels: { app: 'shop', tier: 'front' },
    annotations: { note: 'a "quoted" value' },
  },
  spec: { nodeName: 'node-a', serviceAccountName: 'sa', containers: [{ name: 'app' }] },
};

const pods: Record<string, V1Pod> = {
  'status.hostIPs set': { ...base, status: { hostIP: '198.51.100.1', hostIPs: [{ ip: '198.51.100.2' }] } },
  'status.hostIP only': { ...base, status: { hostIP: '198.51.100.1' } },
  'no status (a static pod)': base,
};

const host = (nodeIP: string | undefined) =>
  ({
    getKubeConfig: () => undefined,
    getHostIP: () => nodeIP,
    getNodeAllocatable: () => ({}),
  }) as unknown as VolumeHost;

type Outcome = { value: string } | { error: string };

async function asEnv(pod: V1Pod, fieldPath: string, h: VolumeHost): Promise<Outcome> {
  const container = { name: 'app', env: [{ name: 'V', valueFrom: { fieldRef: { fieldPath } } }] };
  try {
    return { value: (await containerEnv(pod, container, h)).get('V') ?? '' };
  } catch (err) {
    return { error: String((err as Error).message) };
  }
}

function asVolumeFile(pod: V1Pod, fieldPath: string, h: VolumeHost): Outcome {
  const { payload, errors } = collectDownwardAPIData(
    [{ path: 'f', fieldRef: { fieldPath } }],
    pod,
    h.getNodeAllocatable(),
    0o644,
    h.getHostIP(),
  );
  const [error] = errors;
  return error !== undefined ? { error } : { value: String(payload.get('f')?.data ?? '') };
}

for (const [what, pod] of Object.entries(pods)) {
  for (const nodeIP of ['192.0.2.7', undefined]) {
    test(`env and volume agree on every field path: ${what}, node address ${nodeIP ?? 'unknown'}`, async () => {
      const h = host(nodeIP);
      for (const fieldPath of FIELD_PATHS) {
        assert.deepEqual(await asEnv(pod, fieldPath, h), asVolumeFile(pod, fieldPath, h), fieldPath);
      }
    });
  }
}

test("status.hostIP: the pod's status.hostIPs, else its status.hostIP, else this node's address", () => {
  const get = (pod: V1Pod, nodeIP: string | undefined) => asVolumeFile(pod, 'status.hostIP', host(nodeIP));
  assert.deepEqual(get(pods['status.hostIPs set'] ?? base, '192.0.2.7'), { value: '198.51.100.2' });
  assert.deepEqual(get(pods['status.hostIP only'] ?? base, '192.0.2.7'), { value: '198.51.100.1' });
  assert.deepEqual(get(base, '192.0.2.7'), { value: '192.0.2.7' });
  assert.deepEqual(get(base, undefined), { error: 'status.hostIP is not known on this node' });
});
