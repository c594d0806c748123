// Chaos: kill -9 at random instants while static pods come and go. After the
// last restart every desired volume must be mounted with its data, every
// removed pod's directory and mounts gone, nothing outside the pod
// directories touched, and podvol must never have died on its own.
import assert from 'node:assert/strict';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { callRuntime } from '../../src/agent/runtime/client.ts';
import { type PodvolProcess, runtimeSocketOf, waitFor } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { chaosSetup, figure, random, size } from './lib.ts';

const pod = (i: number) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `churn-${i}`, uid: `chaos-churn-${i}`, labels: { i: String(i) } },
    spec: {
      containers: [
        {
          name: 'c',
          image: 'i',
          volumeMounts: ['disk', 'mem', 'info'].map((n) => ({ name: n, mountPath: `/${n}` })),
        },
      ],
      volumes: [
        { name: 'disk', emptyDir: {} },
        { name: 'mem', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
        {
          name: 'info',
          downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
        },
      ],
    },
  });

mountTest('chaos: kill -9 at random instants during churn', async (t) => {
  const rnd = random();
  const rounds = size(4, 25);
  const { root, manifests, guard, start, state } = await chaosSetup(t);
  let p: PodvolProcess;
  const podDir = (i: number) => join(root, 'pods', `chaos-churn-${i}`);
  const volDir = (i: number, plugin: string, v: string) => join(podDir(i), 'volumes', plugin, v);
  const desired = new Set<number>();
  let lostData = 0;
  // A file each running "container" wrote into its disk emptyDir: it must survive every restart.
  const written = new Set<number>();
  const restarts: number[] = [];
  const volumesReady = async (uid: string) => {
    const answer = await callRuntime(runtimeSocketOf(root), 'GET', `/v1/pods/${uid}/volumes?wait=1`, 10_000);
    return answer.status === 200 && answer.body.ready === true;
  };
  for (let round = 0; round < rounds; round++) {
    p = await start(['--teardown-settle-period', '0s']);
    for (const i of written) {
      if (!desired.has(i)) continue;
      const content = await readFile(
        join(volDir(i, 'kubernetes.io~empty-dir', 'disk'), 'data'),
        'utf8',
      ).catch(() => '');
      if (content !== `data of ${i}`) lostData++;
    }
    // Churn: add one or two pods, remove one, then kill -9 at a random instant.
    for (let k = 0; k < 1 + rnd.int(2); k++) {
      const i = rnd.int(8);
      desired.add(i);
      await writeFile(join(manifests, `churn-${i}.json`), pod(i));
    }
    const gone = [...desired][rnd.int(desired.size)];
    if (gone !== undefined && rnd.next() < 0.5) {
      desired.delete(gone);
      written.delete(gone);
      await rm(join(manifests, `churn-${gone}.json`), { force: true });
    }
    // A "container" starts, and writes into its disk emptyDir, once podvol answers its runtime that
    // the pod's volumes are ready, as a runtime would: a directory that exists may still be the
    // previous incarnation's (the same UID), being torn down because its manifest was removed.
    for (const i of [...desired].filter((i) => !written.has(i))) {
      if (await volumesReady(`chaos-churn-${i}`)) {
        await writeFile(join(volDir(i, 'kubernetes.io~empty-dir', 'disk'), 'data'), `data of ${i}`);
        written.add(i);
      }
    }
    await new Promise((r) => setTimeout(r, rnd.int(1500)));
    const t0 = performance.now();
    await p.stop('SIGKILL');
    restarts.push(performance.now() - t0);
  }
  // The last start: everything converges.
  p = await start(['--teardown-settle-period', '0s']);
  const t0 = performance.now();
  await waitFor(
    'convergence after the last restart',
    async () => {
      const s = await p.status();
      const pods = s?.pods ?? [];
      const ok = [...desired].every((i) => {
        const entry = pods.find((x) => x.uid === `chaos-churn-${i}`);
        return entry?.volumes.length === 3 && entry.volumes.every((v) => v.state === 'mounted');
      });
      return ok && pods.length === desired.size;
    },
    180_000,
  );
  figure(t, 'kill -9: convergence after the last restart', `${(performance.now() - t0).toFixed(0)} ms`);
  await waitFor(
    'removed pods gone from disk',
    async () => {
      for (let i = 0; i < 8; i++)
        if (!desired.has(i) && (await stat(podDir(i)).catch(() => undefined))) return false;
      return true;
    },
    180_000,
  );
  const mounts = await mountsBelow(join(root, 'pods'));
  const expected = [...desired].flatMap((i) => [
    volDir(i, 'kubernetes.io~empty-dir', 'mem'),
    volDir(i, 'kubernetes.io~downward-api', 'info'),
  ]);
  const leaked = mounts.filter((m) => !expected.includes(m.mountPoint));
  const lost = expected.filter((e) => !mounts.some((m) => m.mountPoint === e));
  for (const i of written) {
    if (!desired.has(i)) continue;
    const content = await readFile(join(volDir(i, 'kubernetes.io~empty-dir', 'disk'), 'data'), 'utf8').catch(
      () => '',
    );
    if (content !== `data of ${i}`) lostData++;
  }
  const outside = await guard.changes();
  figure(t, 'kill -9: seed', rnd.seed);
  figure(t, 'kill -9: rounds', rounds);
  figure(t, 'kill -9: leaked mounts', leaked.length);
  figure(t, 'kill -9: lost mounts', lost.length);
  figure(t, 'kill -9: lost emptyDir data', lostData);
  figure(t, 'kill -9: crashes', state.crashes);
  figure(t, 'kill -9: writes outside the pod directories', outside.length);
  assert.deepEqual(leaked, []);
  assert.deepEqual(lost, []);
  assert.equal(lostData, 0);
  assert.equal(state.crashes, 0);
  assert.deepEqual(outside, []);
  assert.equal(await p.stop('SIGTERM'), 0);
  state.daemon = undefined;
  // Stopping unmounts nothing: the table is as it was.
  assert.equal((await mountsBelow(join(root, 'pods'))).length, expected.length);
});
