import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { newConfigMapCache, newSecretCache } from '../../../src/volumehost/kube/object-cache.ts';
import { must } from '../../helpers/must.ts';
import { kubeEnv, waitFor } from './env.ts';

// kubelet waits 1 s for a first list; on a machine shared by several test runs that can be too short.
const LOADED_MACHINE_SYNC_MS = 30_000;
describe('watch-based secret and configmap caches', () => {
  test('get: not registered, then the object, then kubelet-style NotFound', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('secrets', { metadata: { name: 's', namespace: 'ns' }, data: { k: 'dg==' } });
    const secrets = newSecretCache({ kubeConfig: kc, syncTimeoutMs: LOADED_MACHINE_SYNC_MS });
    t.after(() => secrets.stop());
    await assert.rejects(secrets.get('ns', 's'), { message: 'object "ns"/"s" not registered' });
    secrets.register('ns', 's', 'pod-1');
    assert.deepEqual((await secrets.get('ns', 's')).data, { k: 'dg==' });
    secrets.register('ns', 'missing', 'pod-1');
    await assert.rejects(secrets.get('ns', 'missing'), {
      message: 'secret "missing" not found',
      code: 404,
      reason: 'NotFound',
    });
    const watches = api.hooks.requests.filter((r) => r.verb === 'list' || r.verb === 'watch');
    assert.ok(watches.length >= 2);
    for (const w of watches)
      assert.match(must(w.query.fieldSelector, 'fieldSelector'), /^metadata\.name=(s|missing)$/);
    assert.ok(watches.every((w) => w.namespace === 'ns'));
  });

  test('a change to a registered object is announced and served', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('configmaps', { metadata: { name: 'cm', namespace: 'ns' }, data: { a: '1' } });
    const cms = newConfigMapCache({ kubeConfig: kc, syncTimeoutMs: LOADED_MACHINE_SYNC_MS });
    t.after(() => cms.stop());
    const changed: string[] = [];
    cms.onChange((ns, name) => changed.push(`${ns}/${name}`));
    cms.register('ns', 'cm', 'pod-1');
    await cms.get('ns', 'cm');
    const cur = must(api.store.get('configmaps', 'ns', 'cm'), 'configmap cm');
    api.store.update('configmaps', { ...cur, data: { a: '2' } });
    await waitFor('the change', () => changed.length >= 2);
    assert.deepEqual(changed, ['ns/cm', 'ns/cm']);
    assert.deepEqual((await cms.get('ns', 'cm')).data, { a: '2' });

    api.store.delete('configmaps', 'ns', 'cm');
    await waitFor('the delete', () => changed.length === 3);
    await assert.rejects(cms.get('ns', 'cm'), { message: 'configmap "cm" not found' });
  });

  test('reference counted per pod: the watch ends with the last pod', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('secrets', { metadata: { name: 's', namespace: 'ns' } });
    const secrets = newSecretCache({ kubeConfig: kc, syncTimeoutMs: LOADED_MACHINE_SYNC_MS });
    t.after(() => secrets.stop());
    secrets.register('ns', 's', 'pod-1');
    secrets.register('ns', 's', 'pod-2');
    secrets.register('ns', 's', 'pod-2');
    await secrets.get('ns', 's');
    await waitFor('one watch', () => api.hooks.openWatches() === 1);
    secrets.unregister('ns', 's', 'pod-1');
    assert.equal(secrets.isRegistered('ns', 's'), true);
    await secrets.get('ns', 's');
    secrets.unregister('ns', 's', 'pod-2');
    assert.equal(secrets.isRegistered('ns', 's'), false);
    assert.equal(secrets.size(), 0);
    await waitFor('the watch to close', () => api.hooks.openWatches() === 0);
    await assert.rejects(secrets.get('ns', 's'), { message: 'object "ns"/"s" not registered' });
  });

  test('an immutable object is not watched once seen', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('secrets', { metadata: { name: 'frozen', namespace: 'ns' }, immutable: true, data: {} });
    const secrets = newSecretCache({ kubeConfig: kc, syncTimeoutMs: LOADED_MACHINE_SYNC_MS });
    t.after(() => secrets.stop());
    secrets.register('ns', 'frozen', 'pod-1');
    assert.equal((await secrets.get('ns', 'frozen')).immutable, true);
    // The list showed it immutable, so the reflector stopped before ever watching.
    assert.deepEqual(
      api.hooks.requests.filter((r) => r.resource === 'secrets').map((r) => r.verb),
      ['list'],
    );
  });

  test('an unreachable API server is a sync failure, not a NotFound', async (t) => {
    const { api, kc } = await kubeEnv(t);
    await api.hooks.down();
    const secrets = newSecretCache({
      kubeConfig: kc,
      // Long enough for a first list attempt to fail even on a loaded machine.
      syncTimeoutMs: 10_000,
      backoff: { initialMs: 20, maxMs: 50 },
    });
    t.after(() => secrets.stop());
    secrets.register('ns', 's', 'pod-1');
    await assert.rejects(
      secrets.get('ns', 's'),
      /^ApiError: failed to sync secret cache: list secret ns\/s: cannot reach the API server/,
    );
    await assert.rejects(secrets.get('ns', 's'), { reason: 'NotSynced' });
  });
});
