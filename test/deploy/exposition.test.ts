import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { loadCatalog } from './catalog.ts';
import { expositionProblems, parseExposition } from './exposition.ts';

const sample = readFileSync(new URL('./fixtures/sample-metrics.txt', import.meta.url), 'utf8');
const catalog = loadCatalog();

describe('exposition check against metrics.json', () => {
  test('a complete exposition has no problems', () => {
    assert.deepEqual(expositionProblems(sample, catalog), []);
  });

  test('reads families, types and labels (not le)', () => {
    const f = parseExposition(sample).get('storage_operation_duration_seconds');
    assert.equal(f?.type, 'histogram');
    assert.deepEqual([...(f?.labels ?? [])].sort(), [
      'migrated',
      'operation_name',
      'status',
      'volume_plugin',
    ]);
  });

  test('reports a missing family, a wrong type, an extra label and an unlisted metric', () => {
    const broken = sample
      .replace(/^# TYPE podvol_pods gauge$/m, '# TYPE podvol_pods counter')
      .replace(/^(# (HELP|TYPE) podvol_watch_restarts_total.*\n)/gm, '')
      .replace('podvol_build_info{version="0.1.0"', 'podvol_build_info{commit="abc",version="0.1.0"')
      .concat('# HELP podvol_surprise x\n# TYPE podvol_surprise gauge\npodvol_surprise 1\n');
    assert.deepEqual(expositionProblems(broken, catalog), [
      'podvol_pods: exposed as counter, metrics.json says gauge',
      'podvol_watch_restarts_total: in metrics.json but not exposed',
      'podvol_build_info: exposes label commit not listed in metrics.json',
      'podvol_surprise: exposed but missing from metrics.json',
    ]);
  });
});
