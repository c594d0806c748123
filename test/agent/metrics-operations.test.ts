// storage_operation_duration_seconds and podvol_operation_errors_total as the
// volume manager records them: a SetUp of a volume that is already mounted (the
// periodic re-render of a configMap, secret, downwardAPI or projected volume)
// is volume_refresh, not volume_mount, so the refreshes of a node's mounted
// volumes do not hide its real mounts (a deliberate difference from kubelet).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Volume } from '@kubernetes/client-node';
import { createMetrics } from '../../src/agent/metrics.ts';
import { harness, pod } from './volumemanager/harness.ts';

const info: V1Volume = {
  name: 'info',
  downwardAPI: { items: [{ path: 'f', fieldRef: { fieldPath: 'metadata.name' } }] },
};

async function setup(t: Parameters<typeof harness>[0]) {
  const metrics = createMetrics({
    version: 't',
    volumeCounts: () => [],
    volumeStates: () => [],
    podSources: () => [],
  });
  const h = await harness(t, [pod('a', [info])], { metrics });
  h.setReady(true);
  await h.settle();
  assert.equal(h.vm.asw.get('a/info')?.state, 'mounted');
  /** A counter's values, or a histogram's counts, keyed by their labels as `k=v,k=v`. */
  const values = async (name: string) => {
    const text = await metrics.registry.getSingleMetricAsString(name);
    return Object.fromEntries(
      [...text.matchAll(new RegExp(`^${name}(?:_count)?\\{(.*)\\} (\\S+)$`, 'gm'))].map((m) => [
        (m[1] ?? '').replaceAll('"', ''),
        Number(m[2]),
      ]),
    );
  };
  return { ...h, values };
}

const op = (operation: string, status: string) =>
  `volume_plugin=kubernetes.io/downward-api,operation_name=${operation},status=${status},migrated=false`;

test('the periodic re-render of a mounted downwardAPI volume is volume_refresh; its first SetUp stays volume_mount', async (t) => {
  const h = await setup(t);
  // Three periodic refreshes (what --sync-frequency does every minute).
  for (let i = 0; i < 3; i++) {
    h.vm.asw.markRemountRequired(() => true);
    await h.settle();
  }
  assert.deepEqual(await h.values('storage_operation_duration_seconds'), {
    [op('volume_mount', 'success')]: 1,
    [op('volume_refresh', 'success')]: 3,
  });
});

test('a failed re-render of a mounted volume is a volume_refresh failure in both series', async (t) => {
  const h = await setup(t);
  // Every mount-table question about the volume fails now: its next re-render cannot check its tmpfs.
  const path = h.vm.asw.get('a/info')?.path ?? '';
  h.mounter.injectError(path, Object.assign(new Error('EIO'), { code: 'EIO' }));
  h.vm.asw.markRemountRequired(() => true);
  await h.settle();
  assert.equal(h.vm.asw.get('a/info')?.state, 'mounted');
  const durations = await h.values('storage_operation_duration_seconds');
  assert.equal(durations[op('volume_mount', 'success')], 1);
  assert.ok((durations[op('volume_refresh', 'fail-unknown')] ?? 0) >= 1, JSON.stringify(durations));
  assert.equal(durations[op('volume_mount', 'fail-unknown')], undefined);
  const errors = Object.keys(await h.values('podvol_operation_errors_total'));
  assert.ok(errors.length > 0);
  assert.ok(
    errors.every((k) => k.startsWith('operation=volume_refresh,')),
    JSON.stringify(errors),
  );
});
