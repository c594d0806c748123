// kubernetes.io/secret with the fake mounter on a temp directory, as kubelet's
// secret_test.go: a tmpfs wrapper (the bytes never reach disk), the keys as
// files, fsGroup read-only to the group, TearDown unmounting.
import assert from 'node:assert/strict';
import { lstat, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1Secret } from '@kubernetes/client-node';
import { tmpfsNoswapSupported } from '../../src/mount/probe.ts';
import { ApiError } from '../../src/volumehost/errors.ts';
import { podWith } from '../helpers/pods.ts';
import { pluginHarness } from './harness.ts';

const db: V1Secret = {
  metadata: { name: 'db', namespace: 'shop' },
  data: { password: Buffer.from('s3cret').toString('base64'), user: Buffer.from('app').toString('base64') },
};
const getSecret = async (_ns: string, name: string): Promise<V1Secret> => {
  if (name === 'db') return db;
  throw new ApiError('NotFound', `secrets "${name}" not found`);
};
const dirOf = (root: string) => join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~secret', 'creds');

test('a secret is written on a tmpfs sized like a Memory emptyDir, and TearDown unmounts it', async (t) => {
  const h = await pluginHarness(t, { getSecret });
  const pod = podWith([{ name: 'creds', secret: { secretName: 'db', defaultMode: 0o400 } }]);
  await (await h.mounterFor(pod, 'creds')).setUp({});
  const dir = dirOf(h.root);
  const noswap = (await tmpfsNoswapSupported()) ? ['noswap'] : [];
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => [c.fstype, c.target, c.options]),
    [['tmpfs', dir, [`size=${1024 ** 3}`, ...noswap]]],
  );
  assert.equal(await readFile(join(dir, 'password'), 'utf8'), 's3cret');
  assert.equal((await stat(join(dir, 'password'))).mode & 0o777, 0o400);
  await h.unmounterFor(pod, 'creds').tearDown();
  assert.deepEqual(
    h.mounter.callsOf('unmount').map((c) => c.target),
    [dir],
  );
  await assert.rejects(lstat(dir), { code: 'ENOENT' });
});

test('fsGroup: files get the group and group read only (the volume is read-only to containers)', async (t) => {
  const h = await pluginHarness(t, { getSecret });
  const gid = process.getgid?.() ?? 0;
  const pod = podWith([{ name: 'creds', secret: { secretName: 'db', defaultMode: 0o600 } }]);
  await (await h.mounterFor(pod, 'creds')).setUp({ fsGroup: gid });
  const st = await stat(join(dirOf(h.root), 'user'));
  assert.equal(st.mode & 0o777, 0o640);
  assert.equal(st.gid, gid);
});

test('a missing secret: SecretNotFound and no mount left; a forbidden one: Forbidden', async (t) => {
  const h = await pluginHarness(t, {
    getSecret: async (_ns, name) => {
      if (name === 'locked') throw new ApiError('Forbidden', 'secrets "locked" is forbidden');
      return getSecret(_ns, name);
    },
  });
  const pod = podWith([
    { name: 'creds', secret: { secretName: 'gone', defaultMode: 0o644 } },
    { name: 'locked', secret: { secretName: 'locked', defaultMode: 0o644 } },
  ]);
  await assert.rejects((await h.mounterFor(pod, 'creds')).setUp({}), { reason: 'SecretNotFound' });
  await assert.rejects((await h.mounterFor(pod, 'locked')).setUp({}), { reason: 'Forbidden' });
  // The data is fetched before anything is created: nothing was mounted.
  assert.deepEqual(h.mounter.callsOf('mount'), []);
});
