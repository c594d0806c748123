// Chaos: the API server misbehaves under a running podvol: watches dropped
// mid-stream, 410 Gone for every resourceVersion, and an outage. While it is
// down a new pod is bound and a configMap changes; the figure is how long
// after it comes back both reach the disk (goal: 5 s). Asserted: both do,
// nothing crashes, and no volume of the running pod is ever torn down.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { uidOf } from '../helpers/pods.ts';
import { chaosSetup, figure, pct, peakRssMiB, size } from './lib.ts';

const podOf = (name: string) => ({
  metadata: { name, namespace: 'default' },
  spec: {
    nodeName: 'testnode',
    containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'cfg', mountPath: '/cfg' }] }],
    volumes: [{ name: 'cfg', configMap: { name: 'app', defaultMode: 0o644 } }],
  },
  status: { phase: 'Running' },
});

mountTest('chaos: dropped watches, 410s and outages; recovery after the API server returns', async (t) => {
  const outages = size(1, 5);
  const outageMs = size(3000, 20_000);
  const { api, root, start, state } = await chaosSetup(t, { api: true });
  if (!api) throw new Error('no API server');
  const s = api.store;
  s.create('configmaps', { metadata: { name: 'app', namespace: 'default' }, data: { v: '0' } });
  const first = s.create('pods', podOf('steady'));
  const p = await start();
  const cfgFile = (uid: string) => join(root, 'pods', uid, 'volumes', 'kubernetes.io~configmap', 'cfg', 'v');
  const onDisk = (uid: string, v: string) =>
    readFile(cfgFile(uid), 'utf8').then(
      (x) => x === v,
      () => false,
    );
  await waitFor('the steady pod', () => onDisk(uidOf(first), '0'), 90_000);
  // A configMap volume lives on disk (no mount): its file must be there throughout.
  let unmountedUnderFault = 0;
  const watchMount = setInterval(async () => {
    if (!(await stat(cfgFile(uidOf(first))).catch(() => undefined))) unmountedUnderFault++;
  }, 200);
  t.after(() => clearInterval(watchMount));

  const recovery: number[] = [];
  for (let round = 1; round <= outages; round++) {
    // Dropped watches and 410 Gone: the next change still arrives.
    api.hooks.dropWatches();
    api.hooks.compact({ expireWatches: true });
    s.update('configmaps', { metadata: { name: 'app', namespace: 'default' }, data: { v: `gone-${round}` } });
    await waitFor('the change after 410s', () => onDisk(uidOf(first), `gone-${round}`), 60_000);
    // An outage: changes made while it is down must reach the disk soon after it is back.
    await api.hooks.down();
    await new Promise((r) => setTimeout(r, outageMs));
    const added = s.create('pods', podOf(`new-${round}`));
    s.update('configmaps', { metadata: { name: 'app', namespace: 'default' }, data: { v: `back-${round}` } });
    await api.hooks.up();
    const t0 = performance.now();
    await waitFor(
      'the new pod and the configMap change on disk',
      async () =>
        (await onDisk(uidOf(added), `back-${round}`)) && (await onDisk(uidOf(first), `back-${round}`)),
      120_000,
    );
    recovery.push(performance.now() - t0);
  }
  clearInterval(watchMount);
  figure(t, 'API faults: podvol peak RSS (cluster mode)', peakRssMiB(p.proc.pid));
  figure(t, 'API faults: outages', `${outages} of ${outageMs} ms`);
  figure(t, 'API faults: recovery after the API server returns (goal 5000 ms)', pct(recovery));
  figure(t, 'API faults: running volume torn down during faults', unmountedUnderFault);
  figure(t, 'API faults: crashes', state.crashes);
  assert.equal(unmountedUnderFault, 0);
  assert.equal(state.crashes, 0);
  assert.equal((await p.get('/healthz')).status, 200);
});
