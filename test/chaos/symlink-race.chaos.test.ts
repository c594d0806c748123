// Chaos: a "container" still running in a pod's disk emptyDir swaps its
// directories for symlinks to a precious tree outside (and back) as fast as
// it can while podvol tears the pod down (issue 15, finding 1: 19,998 of
// 20,000 outside files were deleted). Every round must leave the outside tree
// as it was, and the pod directory must still go.
import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage } from '../../src/errno.ts';
import { waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { startSwapper } from '../helpers/swapper.ts';
import { chaosSetup, figure, pct, size } from './lib.ts';

const pod = (i: number) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `race-${i}`, uid: `chaos-race-${i}` },
    spec: {
      containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'd', mountPath: '/d' }] }],
      volumes: [{ name: 'd', emptyDir: {} }],
    },
  });

mountTest('chaos: symlinks swapped in during teardown never lead outside', async (t) => {
  const rounds = size(3, 20);
  const { root, manifests, guard, start } = await chaosSetup(t);
  const p = await start();
  const teardown: number[] = [];
  for (let i = 0; i < rounds; i++) {
    await writeFile(join(manifests, `race-${i}.json`), pod(i));
    const dir = join(root, 'pods', `chaos-race-${i}`, 'volumes', 'kubernetes.io~empty-dir', 'd');
    await waitFor(
      'the emptyDir mounted',
      async () => {
        const entry = (await p.status()).pods.find((x) => x.uid === `chaos-race-${i}`);
        return entry?.volumes[0]?.state === 'mounted';
      },
      90_000,
    );
    for (let k = 0; k < 4; k++) {
      await mkdir(join(dir, `sub${k}`), { recursive: true });
      for (let f = 0; f < 50; f++) await writeFile(join(dir, `sub${k}`, `f${f}`), 'x');
    }
    const swapper = startSwapper(t, dir, guard.path);
    // Let it swap a while, then the pod goes while it still runs.
    await new Promise((r) => setTimeout(r, 300));
    const t0 = performance.now();
    await rm(join(manifests, `race-${i}.json`));
    // The swapper may recreate entries faster than they go; the teardown retries until it wins.
    await new Promise((r) => setTimeout(r, 1000));
    swapper.kill('SIGKILL');
    // Generous: each teardown the swapper defeats doubles the backoff (0.5 s, 1 s, 2 s, ...).
    await waitGone('the pod directory', join(root, 'pods', `chaos-race-${i}`), 300_000).catch(async (err) => {
      const left = (await p.status()).pods.find((x) => x.uid === `chaos-race-${i}`);
      throw new Error(`${errorMessage(err)}; status: ${JSON.stringify(left)}`);
    });
    teardown.push(performance.now() - t0);
  }
  const outside = await guard.changes();
  figure(t, 'symlink races: rounds', rounds);
  figure(t, 'symlink races: teardown with a swapping container', pct(teardown));
  figure(t, 'symlink races: entries changed outside the pod directories', outside.length);
  assert.deepEqual(outside, []);
  assert.equal((await p.get('/healthz')).status, 200);
});
