import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/volumehost/kube/config.ts';
import { Reflector } from '../../../src/volumehost/kube/reflector.ts';
import type { ReflectorEvent } from '../../../src/volumehost/kube/store.ts';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { must } from '../../helpers/must.ts';
import { kubeEnv, waitFor } from './env.ts';

function configMaps(
  kc: KubeConfig,
  extra: Partial<ConstructorParameters<typeof Reflector<V1ConfigMap>>[0]> = {},
) {
  const core = kc.makeApiClient(CoreV1Api);
  return new Reflector<V1ConfigMap>({
    name: 'configmaps in ns',
    kubeConfig: kc,
    watchPath: '/api/v1/namespaces/ns/configmaps',
    list: (o) => core.listNamespacedConfigMap({ namespace: 'ns', ...o }),
    backoff: { initialMs: 20, maxMs: 100 },
    ...extra,
  });
}

const names = (r: Reflector<V1ConfigMap>) =>
  r
    .list()
    .map((c) => c.metadata?.name)
    .sort();
const lists = (requests: { verb?: string; resource?: string }[]) =>
  requests.filter((r) => r.verb === 'list' && r.resource === 'configmaps').length;

describe('reflector', () => {
  test('lists, then watches from the list resourceVersion: adds, updates and deletes reach the store', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('configmaps', { metadata: { name: 'before', namespace: 'ns' } });
    api.store.create('configmaps', { metadata: { name: 'elsewhere', namespace: 'other' } });
    const r = configMaps(kc);
    t.after(() => r.stop());
    const events: string[] = [];
    r.onEvent((e: ReflectorEvent<V1ConfigMap>) => events.push(`${e.type} ${e.object.metadata?.name}`));
    await r.start();
    assert.equal(r.hasSynced(), true);
    assert.deepEqual(names(r), ['before']);
    assert.ok(r.lastSyncTime instanceof Date);

    const listRV = Number(r.resourceVersion);
    api.store.create('configmaps', { metadata: { name: 'after', namespace: 'ns' } });
    const cur = must(api.store.get('configmaps', 'ns', 'before'), 'before');
    api.store.update('configmaps', { ...cur, data: { k: 'v' } });
    api.store.delete('configmaps', 'ns', 'after');
    await waitFor('the delete', () => events.length === 4);
    assert.deepEqual(events, ['ADDED before', 'ADDED after', 'MODIFIED before', 'DELETED after']);
    assert.deepEqual(r.get(must(cur.metadata.uid, 'uid'))?.data, { k: 'v' });
    const watch = must(
      api.hooks.requests.find((q) => q.verb === 'watch'),
      'watch',
    );
    assert.equal(watch.query.resourceVersion, String(listRV));
    assert.equal(watch.query.allowWatchBookmarks, 'true');
  });

  test('a dropped watch reconnects from the last resourceVersion without relisting', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const r = configMaps(kc);
    t.after(() => r.stop());
    await r.start();
    await waitFor('the watch', () => api.hooks.openWatches() === 1);
    api.hooks.dropWatches();
    api.store.create('configmaps', { metadata: { name: 'while-dropped', namespace: 'ns' } });
    await waitFor('the object', () => names(r).includes('while-dropped'));
    assert.ok(r.watchRestarts >= 1);
    assert.equal(lists(api.hooks.requests), 1);
  });

  test('410 Gone as a watch ERROR event relists', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const r = configMaps(kc);
    t.after(() => r.stop());
    await r.start();
    await waitFor('the watch', () => api.hooks.openWatches() === 1);
    api.hooks.compact({ expireWatches: true });
    await waitFor('a relist', () => lists(api.hooks.requests) === 2);
    assert.equal(r.watchRestartsByReason.expired, 1);
  });

  test('resuming from a compacted resourceVersion relists and converges, deleting what vanished', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('configmaps', { metadata: { name: 'old', namespace: 'ns' } });
    const r = configMaps(kc);
    t.after(() => r.stop());
    await r.start();
    await api.hooks.down();
    api.store.delete('configmaps', 'ns', 'old');
    api.store.create('configmaps', { metadata: { name: 'new', namespace: 'ns' } });
    api.hooks.compact();
    await api.hooks.up();
    await waitFor('the relist', () => names(r).join() === 'new');
    assert.ok(r.watchRestartsByReason.expired >= 1);
  });

  test('a watch silent past its lifetime is restarted by the watchdog', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const clock = fakeClock();
    const r = configMaps(kc, { watchTimeoutSeconds: 1, watchdogGraceMs: 200, clock });
    t.after(() => r.stop());
    await r.start();
    await waitFor('the watch', () => api.hooks.openWatches() === 1);
    api.hooks.freezeWatches();
    api.store.create('configmaps', { metadata: { name: 'unseen', namespace: 'ns' } });
    await clock.advance(1199);
    assert.equal(r.watchRestartsByReason.watchdog, 0, 'not before the lifetime is over');
    await clock.advance(1);
    await waitFor('the watchdog', () => r.watchRestartsByReason.watchdog >= 1);
    assert.deepEqual(names(r), []);
    api.hooks.unfreezeWatches();
    await waitFor('the object after the restart', () => names(r).includes('unseen'));
  });

  test('API server down at start: start() resolves unsynced, then it syncs once the server is up', async (t) => {
    const { api, kc } = await kubeEnv(t);
    api.store.create('configmaps', { metadata: { name: 'c', namespace: 'ns' } });
    await api.hooks.down();
    const r = configMaps(kc);
    t.after(() => r.stop());
    await r.start();
    assert.equal(r.hasSynced(), false);
    assert.equal(r.lastError?.reason, 'Unreachable');
    assert.match(
      must(r.lastError, 'lastError').message,
      /^list configmaps in ns: cannot reach the API server at https:\/\/127\.0\.0\.1:\d+: ECONNREFUSED$/,
    );
    await api.hooks.up();
    assert.equal(await r.waitForSync(5000), true);
    assert.deepEqual(names(r), ['c']);
    assert.equal(r.lastError, undefined);
  });

  test('failed lists are retried after a jittered exponential backoff, on the injected clock', async (t) => {
    const { api, kc } = await kubeEnv(t);
    await api.hooks.down();
    // random() 0.5: each delay is 0.625 of its step (steps 500 ms, 1 s, 2 s, 4 s, 4 s ...).
    const clock = fakeClock(Date.UTC(2026, 0, 1), 0.5);
    const r = configMaps(kc, { backoff: undefined, clock });
    t.after(() => r.stop());
    await r.start();
    assert.equal(r.hasSynced(), false);
    await api.hooks.up();
    await clock.advance(312);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(r.hasSynced(), false, 'no retry before 312.5 ms');
    await clock.advance(1);
    await waitFor('the retried list', () => r.hasSynced());
    assert.equal(r.lastSyncTime?.getTime(), Date.UTC(2026, 0, 1) + 313, 'times come from the clock too');
  });

  test('401 is reported as a clear credentials error and never counts as synced', async (t) => {
    const { api, dir } = await kubeEnv(t);
    const kc = loadKubeConfig({ kubeconfig: await api.kubeconfigPath(dir, { token: 'revoked' }) });
    const r = configMaps(kc);
    t.after(() => r.stop());
    let changes = 0;
    r.onChange(() => changes++);
    await r.start();
    assert.equal(r.hasSynced(), false);
    assert.equal(r.lastError?.reason, 'Unauthorized');
    assert.equal(r.lastError?.code, 401);
    assert.match(
      must(r.lastError, 'lastError').message,
      /^list configmaps in ns: 401 Unauthorized from https:\/\/127\.0\.0\.1:\d+: the API server rejected the credentials/,
    );
    assert.ok(changes >= 1, 'the error is announced through onChange');
    assert.equal(await r.waitForSync(100), false);
  });

  test('stop() closes the watch and ends the loop', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const r = configMaps(kc);
    await r.start();
    await waitFor('the watch', () => api.hooks.openWatches() === 1);
    await r.stop();
    await waitFor('the watch to close', () => api.hooks.openWatches() === 0);
    const before = api.hooks.requests.length;
    await new Promise((res) => setTimeout(res, 100));
    assert.equal(api.hooks.requests.length, before);
  });
});
