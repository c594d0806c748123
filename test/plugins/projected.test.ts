// kubernetes.io/projected with the fake mounter on a temp directory, as
// kubelet's projected_test.go: sources merged into one tmpfs-backed volume,
// the token file private to fsUser/fsGroup, errors of every source reported.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AuthenticationV1TokenRequest } from '@kubernetes/client-node';
import { ApiError } from '../../src/volumehost/errors.ts';
import { podWith } from '../helpers/pods.ts';
import { pluginHarness } from './harness.ts';

const dirOf = (root: string) => join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~projected', 'all');

const cluster = {
  getConfigMap: async () => ({ data: { 'ca.crt': 'CA' } }),
  getSecret: async () => ({ data: { key: Buffer.from('K').toString('base64') } }),
  getServiceAccountToken: async (
    _ns: string,
    _name: string,
    tr: AuthenticationV1TokenRequest,
  ): Promise<AuthenticationV1TokenRequest> => ({
    ...tr,
    status: { token: `token-for-${tr.spec?.audiences?.[0] ?? 'api'}`, expirationTimestamp: new Date(0) },
  }),
};

const projected = (defaultMode = 0o644) =>
  podWith([
    {
      name: 'all',
      projected: {
        defaultMode,
        sources: [
          { configMap: { name: 'ca' } },
          { secret: { name: 'tls', items: [{ key: 'key', path: 'tls/key' }] } },
          { downwardAPI: { items: [{ path: 'ns', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
          { serviceAccountToken: { path: 'token', audience: 'vault' } },
        ],
      },
    },
  ]);

test('every source lands in one volume; the token is asked for the pod with its audience', async (t) => {
  const h = await pluginHarness(t, cluster);
  await (await h.mounterFor(projected(), 'all')).setUp({});
  const dir = dirOf(h.root);
  assert.equal(await readFile(join(dir, 'ca.crt'), 'utf8'), 'CA');
  assert.equal(await readFile(join(dir, 'tls', 'key'), 'utf8'), 'K');
  assert.equal(await readFile(join(dir, 'ns'), 'utf8'), 'shop');
  assert.equal(await readFile(join(dir, 'token'), 'utf8'), 'token-for-vault');
  assert.equal((await stat(join(dir, 'token'))).mode & 0o777, 0o644);
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => c.fstype),
    ['tmpfs'],
  );
});

test('with fsGroup the token is written 0600 and opened to the group: 0640', async (t) => {
  const h = await pluginHarness(t, cluster);
  await (await h.mounterFor(projected(), 'all')).setUp({ fsGroup: process.getgid?.() ?? 0 });
  assert.equal((await stat(join(dirOf(h.root), 'token'))).mode & 0o777, 0o640);
  assert.equal((await stat(join(dirOf(h.root), 'ns'))).mode & 0o777, 0o644);
});

test('errors of several sources are all reported; the first one gives the reason', async (t) => {
  const h = await pluginHarness(t, {
    ...cluster,
    getConfigMap: async () => {
      throw new ApiError('NotFound', 'configmaps "ca" not found');
    },
    getServiceAccountToken: async () => {
      throw new ApiError('Forbidden', 'serviceaccounts "default" is forbidden');
    },
  });
  await assert.rejects(
    (await h.mounterFor(projected(), 'all')).setUp({}),
    (err: Error & { reason: string }) => {
      assert.equal(err.reason, 'ConfigMapNotFound');
      assert.match(err.message, /configmaps "ca" not found.*forbidden/);
      return true;
    },
  );
  assert.deepEqual(h.mounter.callsOf('mount'), []);
});
