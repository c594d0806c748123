// kubelet's cleanOrphanVolumes: a volume directory found at start-up that cannot
// be reconstructed (its plugin is unknown) and that no pod wants is force-cleaned
// once the pod sources have synced, and counted as kubelet counts it.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createMetrics } from '../../../src/agent/metrics.ts';
import { harness } from './harness.ts';

test('a volume that failed reconstruction is force-cleaned once sources are ready, and counted', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'podvol-force-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const orphan = join(root, 'pods/gone-1/volumes/example.com~retired/data');
  await mkdir(orphan, { recursive: true });
  await mkdir(join(root, 'podvol/pods/gone-1'), { recursive: true }); // podvol made it (records.ts ownership)
  const metrics = createMetrics({
    version: 't',
    volumeCounts: () => [],
    volumeStates: () => [],
    podSources: () => [],
  });
  const { vm, mounter, setReady } = await harness(t, [], { root, metrics });
  const counter = async (name: string) =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value ?? 0;
  assert.equal(await counter('reconstruct_volume_operations_errors_total'), 1);

  await vm.reconcileOnce();
  const askedAboutOrphan = () =>
    mounter.calls.filter((c) => c.method === 'isMountPoint' && c.path === orphan).length;
  assert.equal(askedAboutOrphan(), 0, 'nothing before the sources have synced');
  await stat(orphan);
  setReady(true);
  await vm.reconcileOnce();
  await vm.reconcileOnce();
  assert.equal(askedAboutOrphan(), 1, 'cleaned once (one shot, as kubelet)');
  assert.equal(await counter('force_cleaned_failed_volume_operations_total'), 1);
  assert.equal(await counter('force_cleaned_failed_volume_operation_errors_total'), 0);
  await assert.rejects(stat(orphan), 'the directory is gone');
});
