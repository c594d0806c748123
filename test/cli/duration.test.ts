// Durations as kubelet's flags take them (Go's time.ParseDuration).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDuration, parseDuration } from '../../src/cli/duration.ts';

test('Go durations parse to milliseconds', () => {
  const cases: [string, number][] = [
    ['1m0s', 60_000],
    ['90s', 90_000],
    ['1m', 60_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['2s500ms', 2500],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['3000000ns', 3],
    ['.5s', 500],
    ['0', 0],
    ['-1s', -1000],
    ['+2m', 120_000],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, text);
});

test('anything else is refused with the reason', () => {
  assert.throws(() => parseDuration('60'), /invalid duration "60": missing unit/);
  for (const bad of ['', 's', '1x', '1 m', '1m 0s', '1d', '--1s', 'm1', '1.2.3s']) {
    assert.throws(() => parseDuration(bad), /duration/, bad);
  }
});

test('rendered as Go prints a Duration', () => {
  assert.equal(formatDuration(60_000), '1m0s');
  assert.equal(formatDuration(90_000), '1m30s');
  assert.equal(formatDuration(5_400_000), '1h30m0s');
  assert.equal(formatDuration(500), '500ms');
  assert.equal(formatDuration(1500), '1.5s');
  assert.equal(formatDuration(0), '0s');
  for (const ms of [60_000, 90_000, 5_400_000, 500, 1500, 3_723_400]) {
    assert.equal(parseDuration(formatDuration(ms)), ms);
  }
});
