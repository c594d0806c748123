import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { nestedMountpoints } from '../../src/plugins/nested-mountpoints.ts';

const pod = (mounts: [string, string][]): V1Pod => ({
  spec: {
    containers: [{ name: 'c', volumeMounts: mounts.map(([name, mountPath]) => ({ name, mountPath })) }],
  },
});

test('directories for volumes mounted below this one, one level only (kubelet nested_volumes.go)', () => {
  const p = pod([
    ['cfg', '/etc/app'],
    ['tls', '/etc/app/tls'],
    ['deeper', '/etc/app/tls/ca'],
    ['other', '/etc/application'],
    ['logs', '/etc/app/logs/'],
  ]);
  assert.deepEqual(nestedMountpoints('cfg', p), ['logs', 'tls']);
  assert.deepEqual(nestedMountpoints('tls', p), ['ca']);
  assert.deepEqual(nestedMountpoints('other', p), []);
});

test('a relative mount path that climbs out is refused', () => {
  assert.throws(
    () =>
      nestedMountpoints(
        'cfg',
        pod([
          ['cfg', '../x'],
          ['n', '../x/y'],
        ]),
      ),
    /invalid container mount point/,
  );
});

test('a mountPath of .. is refused too (kubelet misses it: a second mount at ../../x would climb out)', () => {
  assert.throws(
    () =>
      nestedMountpoints(
        'cfg',
        pod([
          ['cfg', '..'],
          ['n', '../../../x'],
        ]),
      ),
    /invalid container mount point \.\./,
  );
});
