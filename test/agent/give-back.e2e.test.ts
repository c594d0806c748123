// The memory give-back wired into `podvol run` (issue 20, P4): a big teardown
// gives memory back once, after the daemon went quiet; a small one does not.
// The policy itself is test/agent/give-back.test.ts's, on a fake clock.
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GIVE_BACK_MIN_RELEASED, GIVE_BACK_QUIET_MS } from '../../src/agent/give-back.ts';
import { daemonDirs, type PodvolProcess, startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

/** A static pod of `n` disk emptyDir volumes: directories only, no mount, so hundreds are set up quickly. */
const manyVolumes = (name: string, n: number) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      // As kubelet, only volumes a container mounts are set up.
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: Array.from({ length: n }, (_, i) => ({ name: `v${i}`, mountPath: `/v${i}` })),
        },
      ],
      volumes: Array.from({ length: n }, (_, i) => ({ name: `v${i}`, emptyDir: {} })),
    },
  });

const mountedCount = async (p: PodvolProcess) =>
  (await p.status()).pods.flatMap((x) => x.volumes).filter((v) => v.state === 'mounted').length;

const gaveBack = (p: PodvolProcess) =>
  p.logLines().filter((l) => l.msg === 'gave memory back after teardown');

mountTest('a big teardown gives memory back once; a small one does not', async (t) => {
  const { root, manifests } = await daemonDirs(await tempDir(t));
  const big = GIVE_BACK_MIN_RELEASED + 10;
  const small = Math.floor(GIVE_BACK_MIN_RELEASED / 4);
  await writeFile(join(manifests, 'small.json'), manyVolumes('small', small));
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  await waitFor('the small pod set up', async () => (await mountedCount(p)) === small || undefined, 120_000);
  await rm(join(manifests, 'small.json'));
  await waitFor('the small pod torn down', async () => (await mountedCount(p)) === 0 || undefined, 120_000);
  await sleep(GIVE_BACK_QUIET_MS + 1000);
  assert.deepEqual(gaveBack(p), [], `${small} volumes torn down: below the threshold`);

  await writeFile(join(manifests, 'big.json'), manyVolumes('big', big));
  await waitFor('the big pod set up', async () => (await mountedCount(p)) === big || undefined, 120_000);
  await rm(join(manifests, 'big.json'));
  const [line] = await waitFor(
    'the give-back after the big teardown',
    () => (gaveBack(p).length > 0 ? gaveBack(p) : undefined),
    120_000,
  );
  assert.ok(line);
  assert.equal(line.volumes, 0);
  assert.equal(line.peakVolumes, big);
  const [rssBefore, rssAfter] = line.rssMiB as [number, number];
  assert.ok(rssBefore > 0 && rssAfter > 0, JSON.stringify(line));
  await sleep(GIVE_BACK_QUIET_MS + 1000);
  assert.equal(gaveBack(p).length, 1, 'once per drop');
  assert.equal((await p.get('/healthz')).status, 200);
});
