import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StorageV1Api } from '@kubernetes/client-node';
import { CSIDriverInformer } from '../../../src/volumehost/kube/csidriver-informer.ts';
import { kubeEnv, waitFor } from './env.ts';

describe('CSIDriver informer', () => {
  test('serves drivers by name after sync and follows changes', async (t) => {
    const { kc } = await kubeEnv(t);
    const storage = kc.makeApiClient(StorageV1Api);
    await storage.createCSIDriver({
      body: { metadata: { name: 'a.csi.io' }, spec: { podInfoOnMount: true } },
    });
    const informer = new CSIDriverInformer({ kubeConfig: kc });
    t.after(() => informer.stop());
    assert.equal(informer.hasSynced(), false);
    await informer.start();
    await informer.waitForCacheSync(1000);
    assert.equal(informer.hasSynced(), true);
    assert.equal(informer.lister.get('a.csi.io')?.spec.podInfoOnMount, true);
    assert.equal(informer.get('b.csi.io'), undefined);

    await storage.createCSIDriver({
      body: { metadata: { name: 'b.csi.io' }, spec: { tokenRequests: [{ audience: 'vault' }] } },
    });
    await storage.deleteCSIDriver({ name: 'a.csi.io' });
    await waitFor(
      'both changes',
      () =>
        informer
          .list()
          .map((d) => d.metadata?.name)
          .join() === 'b.csi.io',
    );
    assert.deepEqual(informer.get('b.csi.io')?.spec.tokenRequests, [{ audience: 'vault' }]);
  });

  test('waitForCacheSync fails with the cause when the API server cannot be reached', async (t) => {
    const { api, kc } = await kubeEnv(t);
    await api.hooks.down();
    const informer = new CSIDriverInformer({ kubeConfig: kc, backoff: { initialMs: 20, maxMs: 50 } });
    t.after(() => informer.stop());
    await informer.start();
    await assert.rejects(
      informer.waitForCacheSync(200),
      /^Error: failed to wait for cache sync for CSIDriverLister: list csidrivers: cannot reach the API server/,
    );
  });
});
