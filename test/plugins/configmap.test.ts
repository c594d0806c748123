// kubernetes.io/configmap with the fake mounter on a temp directory, as
// kubelet's configmap_test.go: the keys as files through the atomic writer,
// on a disk-backed wrapper (nothing mounted), items, modes and optional.
import assert from 'node:assert/strict';
import { lstat, readdir, readFile, readlink, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { ApiError } from '../../src/volumehost/errors.ts';
import { podWith } from '../helpers/pods.ts';
import { pluginHarness } from './harness.ts';

const settings: V1ConfigMap = {
  metadata: { name: 'settings', namespace: 'shop' },
  data: { 'app.conf': 'listen 80\n', level: 'debug' },
  binaryData: { 'logo.bin': Buffer.from([0, 1, 2]).toString('base64') },
};
const getConfigMap = async (ns: string, name: string): Promise<V1ConfigMap> => {
  if (ns === 'shop' && name === 'settings') return settings;
  throw new ApiError('NotFound', `configmaps "${name}" not found`);
};
const dirOf = (root: string, name: string) =>
  join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~configmap', name);

test('every key becomes a file (binaryData too), behind ..data, and nothing is mounted', async (t) => {
  const h = await pluginHarness(t, { getConfigMap });
  const pod = podWith([{ name: 'cfg', configMap: { name: 'settings', defaultMode: 0o644 } }]);
  await (await h.mounterFor(pod, 'cfg')).setUp({});
  const dir = dirOf(h.root, 'cfg');
  assert.deepEqual((await readdir(dir)).filter((n) => !n.startsWith('..2')).sort(), [
    '..data',
    'app.conf',
    'level',
    'logo.bin',
  ]);
  assert.equal(await readlink(join(dir, 'level')), '..data/level');
  assert.equal(await readFile(join(dir, 'app.conf'), 'utf8'), 'listen 80\n');
  assert.deepEqual([...(await readFile(join(dir, 'logo.bin')))], [0, 1, 2]);
  assert.equal((await stat(join(dir, 'level'))).mode & 0o777, 0o644);
  assert.deepEqual(h.mounter.callsOf('mount'), []);
});

test('items pick keys, set paths and modes; a missing key fails with KeyNotFound unless optional', async (t) => {
  const h = await pluginHarness(t, { getConfigMap });
  const pod = podWith([
    {
      name: 'picked',
      configMap: {
        name: 'settings',
        defaultMode: 0o644,
        items: [{ key: 'app.conf', path: 'etc/app.conf', mode: 0o400 }],
      },
    },
    {
      name: 'missing',
      configMap: { name: 'settings', defaultMode: 0o644, items: [{ key: 'nope', path: 'x' }] },
    },
  ]);
  await (await h.mounterFor(pod, 'picked')).setUp({});
  const dir = dirOf(h.root, 'picked');
  assert.equal((await stat(join(dir, 'etc', 'app.conf'))).mode & 0o777, 0o400);
  await assert.rejects((await h.mounterFor(pod, 'missing')).setUp({}), {
    reason: 'KeyNotFound',
    message: 'configmap references non-existent config key: nope',
  });
  // A first set-up that fails is rolled back: no half volume is left.
  await assert.rejects(lstat(dirOf(h.root, 'missing')), { code: 'ENOENT' });
});

test('a missing configMap: ConfigMapNotFound, or an empty volume when optional', async (t) => {
  const h = await pluginHarness(t, { getConfigMap });
  const pod = podWith([
    { name: 'gone', configMap: { name: 'gone', defaultMode: 0o644 } },
    { name: 'maybe', configMap: { name: 'gone', defaultMode: 0o644, optional: true } },
  ]);
  await assert.rejects((await h.mounterFor(pod, 'gone')).setUp({}), { reason: 'ConfigMapNotFound' });
  await (await h.mounterFor(pod, 'maybe')).setUp({});
  assert.deepEqual(
    (await readdir(dirOf(h.root, 'maybe'))).filter((n) => !n.startsWith('..2')),
    ['..data'],
  );
});

test('an update swaps ..data at once; TearDown removes the volume and its wrapper', async (t) => {
  let level = 'debug';
  const h = await pluginHarness(t, {
    getConfigMap: async () => ({ ...settings, data: { level } }),
  });
  const pod = podWith([{ name: 'cfg', configMap: { name: 'settings', defaultMode: 0o644 } }]);
  const m = await h.mounterFor(pod, 'cfg');
  await m.setUp({});
  const dir = dirOf(h.root, 'cfg');
  const first = await readlink(join(dir, '..data'));
  level = 'info';
  await m.setUp({});
  assert.notEqual(await readlink(join(dir, '..data')), first);
  assert.equal(await readFile(join(dir, 'level'), 'utf8'), 'info');
  await assert.rejects(lstat(join(dir, first)), { code: 'ENOENT' }, 'the old data is gone');
  await h.unmounterFor(pod, 'cfg').tearDown();
  await assert.rejects(lstat(dir), { code: 'ENOENT' });
  await assert.rejects(
    lstat(join(h.root, 'pods', 'uid-1', 'plugins', 'kubernetes.io~empty-dir', 'wrapped_cfg')),
    {
      code: 'ENOENT',
    },
  );
});
