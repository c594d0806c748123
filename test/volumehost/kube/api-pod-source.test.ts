import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ApiPodSource } from '../../../src/agent/pods/api-source.ts';
import { loadKubeConfig } from '../../../src/volumehost/kube/config.ts';
import { at, must } from '../../helpers/must.ts';
import { kubeEnv, waitFor } from './env.ts';

function pod(ns: string, name: string, nodeName?: string): V1Pod {
  return { metadata: { name, namespace: ns }, spec: { nodeName, containers: [{ name: 'c', image: 'i' }] } };
}

/** The source of node1's pods, stopped when the test ends. */
function podSource(t: TestContext, kc: KubeConfig): ApiPodSource {
  const source = new ApiPodSource({
    kubeConfig: kc,
    nodeName: 'node1',
    backoff: { initialMs: 20, maxMs: 100 },
  });
  t.after(() => source.stop());
  return source;
}

const listed = (s: ApiPodSource) =>
  s
    .pods()
    .map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)
    .sort();

describe('API pod source', () => {
  test('lists and watches only the pods bound to this node, keyed by UID', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'mine', 'node1') });
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'theirs', 'node2') });
    const source = podSource(t, kc);
    let changes = 0;
    source.onChange(() => changes++);
    assert.equal(source.name, 'api');
    await source.start();
    assert.equal(source.hasSynced(), true);
    assert.deepEqual(listed(source), ['a/mine']);
    assert.ok(changes >= 1);

    await core.createNamespacedPod({ namespace: 'b', body: pod('b', 'new', 'node1') });
    await waitFor('the new pod', () => listed(source).includes('b/new'));
    const mine = await core.readNamespacedPod({ namespace: 'a', name: 'mine' });
    must(mine.metadata, 'metadata').labels = { v: '2' };
    await core.replaceNamespacedPod({ namespace: 'a', name: 'mine', body: mine });
    await waitFor('the update', () => source.pods().some((p) => p.metadata?.labels?.v === '2'));
    assert.deepEqual(listed(source), ['a/mine', 'b/new']);

    for (const q of api.hooks.requests.filter(
      (r) => r.resource === 'pods' && (r.verb === 'list' || r.verb === 'watch'),
    )) {
      assert.equal(q.query.fieldSelector, 'spec.nodeName=node1', `${q.verb} uses the node field selector`);
    }
  });

  test('a gracefully deleted pod stays until it is really deleted; then it is gone', async (t) => {
    const { kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'p', 'node1') });
    const source = podSource(t, kc);
    await source.start();
    await core.deleteNamespacedPod({ namespace: 'a', name: 'p', gracePeriodSeconds: 30 });
    await waitFor('the deletionTimestamp', () => !!source.pods()[0]?.metadata?.deletionTimestamp);
    await core.deleteNamespacedPod({ namespace: 'a', name: 'p', gracePeriodSeconds: 0 });
    await waitFor('the delete', () => source.pods().length === 0);
  });

  test('pods that reached Succeeded or Failed are left out', async (t) => {
    const { kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'job', 'node1') });
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'crash', 'node1') });
    await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'web', 'node1') });
    const source = podSource(t, kc);
    await source.start();
    assert.equal(source.pods().length, 3);
    for (const [name, phase] of [
      ['job', 'Succeeded'],
      ['crash', 'Failed'],
      ['web', 'Running'],
    ] as const) {
      const p = await core.readNamespacedPod({ namespace: 'a', name });
      p.status = { phase };
      await core.replaceNamespacedPodStatus({ namespace: 'a', name, body: p });
    }
    await waitFor('the phases', () => source.pods().length === 1);
    assert.deepEqual(listed(source), ['a/web']);
  });

  test('the same namespace/name with a new UID replaces the old pod (delete + add)', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    const first = await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'sts-0', 'node1') });
    const source = podSource(t, kc);
    await source.start();

    await core.deleteNamespacedPod({ namespace: 'a', name: 'sts-0', gracePeriodSeconds: 0 });
    const second = await core.createNamespacedPod({ namespace: 'a', body: pod('a', 'sts-0', 'node1') });
    await waitFor('the new UID', () => source.pods()[0]?.metadata?.uid === second.metadata?.uid);
    assert.equal(source.pods().length, 1);
    assert.notEqual(first.metadata?.uid, second.metadata?.uid);

    // Replaced while the agent could not see it, and the history compacted away: the relist converges.
    await api.hooks.down();
    api.store.delete('pods', 'a', 'sts-0', { gracePeriodSeconds: 0 });
    const third = api.store.create('pods', pod('a', 'sts-0', 'node1') as never);
    api.hooks.compact();
    await api.hooks.up();
    await waitFor('the third UID', () => source.pods()[0]?.metadata?.uid === third.metadata.uid);
    assert.equal(source.pods().length, 1);
  });

  test('hasSynced stays false and errors() explains until a list succeeds', async (t) => {
    const { api, dir } = await kubeEnv(t);
    const kc = loadKubeConfig({ kubeconfig: await api.kubeconfigPath(dir, { token: 'wrong' }) });
    const source = podSource(t, kc);
    await source.start();
    assert.equal(source.hasSynced(), false);
    const err = at(source.errors(), 0);
    assert.equal(err.source, 'api');
    assert.equal(err.reason, 'Unauthorized');
    assert.match(err.message, /^list pods on node node1: 401 Unauthorized/);
    api.hooks.setToken('wrong');
    await waitFor('the sync', () => source.hasSynced());
    assert.deepEqual(source.errors(), []);
  });
});
