import assert from 'node:assert/strict';
import { test } from 'node:test';

test('the test runner runs on Node >= 22.19', () => {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  assert.ok(major > 22 || (major === 22 && minor >= 19), process.versions.node);
});
