import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { metricNamesInPromQL, metricNamesInVariableQuery } from './promql.ts';

describe('metricNamesInPromQL', () => {
  test('finds selectors but not functions, label names, label values or durations', () => {
    assert.deepEqual(
      metricNamesInPromQL(
        'histogram_quantile(0.99, sum by (le, operation_name) (rate(storage_operation_duration_seconds_bucket{job="podvol", status=~"fail|podvol_fake"}[5m] offset 1h)))',
      ),
      ['storage_operation_duration_seconds_bucket'],
    );
  });

  test('finds both sides of binary operators and ignores keywords and numbers', () => {
    assert.deepEqual(
      metricNamesInPromQL('time() - a_seconds{x="1"} > 900 and on (instance) b_total unless c or vector(0)'),
      ['a_seconds', 'b_total', 'c'],
    );
  });

  test('ignores Grafana variables', () => {
    assert.deepEqual(metricNamesInPromQL('rate(x_total{instance=~"$instance"}[$__rate_interval])'), [
      'x_total',
    ]);
  });
});

describe('metricNamesInVariableQuery', () => {
  test('label_values names the metric, not the label', () => {
    assert.deepEqual(metricNamesInVariableQuery('label_values(podvol_build_info{job="podvol"}, instance)'), [
      'podvol_build_info',
    ]);
  });
});
