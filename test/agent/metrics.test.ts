// Metrics with kubelet's names and series: what a kubelet dashboard or alert
// written for the volume manager sees from podvol.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMetrics } from '../../src/agent/metrics.ts';

/** Metrics over fixed sources: the volume counts and emptyDir samples given, nothing else. */
const metricsWith = (
  counts: { plugin: string; desired: number; actual: number }[],
  emptyDirs: NonNullable<Parameters<typeof createMetrics>[0]['emptyDirs']> = () => [],
) =>
  createMetrics({
    version: 't',
    volumeCounts: () => counts,
    volumeStates: () => [],
    podSources: () => [],
    emptyDirs,
  });

test('volume_manager_total_volumes has no zero-valued series, as kubelet collects it', async () => {
  const m = metricsWith([
    { plugin: 'kubernetes.io/empty-dir', desired: 2, actual: 0 },
    { plugin: 'kubernetes.io/secret', desired: 0, actual: 1 },
  ]);
  const text = await m.registry.getSingleMetricAsString('volume_manager_total_volumes');
  const series = text.split('\n').filter((l) => l.startsWith('volume_manager_total_volumes{'));
  assert.deepEqual(series.sort(), [
    'volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 2',
    'volume_manager_total_volumes{plugin_name="kubernetes.io/secret",state="actual_state_of_world"} 1',
  ]);
});

test('emptyDir usage and sizeLimit per namespace, pod name and volume; a limit series only where there is a limit', async () => {
  const m = metricsWith([], () => [
    { namespace: 'shop', pod: 'web-0', volume: 'scratch', usedBytes: 3_145_728, sizeLimitBytes: 2_097_152 },
    { namespace: 'shop', pod: 'web-0', volume: 'tmp', usedBytes: 4096 },
  ]);
  const series = async (name: string) =>
    (await m.registry.getSingleMetricAsString(name)).split('\n').filter((l) => l.startsWith(`${name}{`));
  assert.deepEqual(await series('podvol_emptydir_used_bytes'), [
    'podvol_emptydir_used_bytes{namespace="shop",pod="web-0",volume="scratch"} 3145728',
    'podvol_emptydir_used_bytes{namespace="shop",pod="web-0",volume="tmp"} 4096',
  ]);
  assert.deepEqual(await series('podvol_emptydir_size_limit_bytes'), [
    'podvol_emptydir_size_limit_bytes{namespace="shop",pod="web-0",volume="scratch"} 2097152',
  ]);
});

test('two pods of one name (one recreated while the old one is still mounted) give one pair of series: the fuller volume', async () => {
  const m = metricsWith([], () => [
    { namespace: 'shop', pod: 'web-0', volume: 'scratch', usedBytes: 900, sizeLimitBytes: 1000 },
    { namespace: 'shop', pod: 'web-0', volume: 'scratch', usedBytes: 1500, sizeLimitBytes: 1000 },
    { namespace: 'shop', pod: 'web-0', volume: 'scratch', usedBytes: 1800, sizeLimitBytes: 4000 },
  ]);
  const text = await m.registry.metrics();
  assert.match(text, /^podvol_emptydir_used_bytes\{[^}]*\} 1500$/m);
  assert.match(text, /^podvol_emptydir_size_limit_bytes\{[^}]*\} 1000$/m);
  assert.equal(text.match(/^podvol_emptydir_used_bytes\{/gm)?.length, 1);
});

test("the reconstruction counters' help texts name podvol, whose startup it is", async () => {
  const text = await metricsWith([]).registry.metrics();
  const help = text.split('\n').filter((l) => /^# HELP (reconstruct|force_cleaned)_/.test(l));
  assert.equal(help.length, 4);
  for (const l of help) assert.match(l, /during podvol startup/);
  assert.doesNotMatch(text, /kubelet startup/);
});
