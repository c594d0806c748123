// Metrics with kubelet's names and series: what a kubelet dashboard or alert
// written for the volume manager sees from podvol.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMetrics } from '../../src/agent/metrics.ts';

const metricsWith = (counts: { plugin: string; desired: number; actual: number }[]) =>
  createMetrics({ version: 't', volumeCounts: () => counts, volumeStates: () => [], podSources: () => [] });

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
