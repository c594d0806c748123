// P5: restart with N volumes mounted → /readyz 200, and how many mount and
// umount calls the new process made (should be none: it adopts what is
// mounted; the mount ids below the root are compared too). Baseline in the
// same run: the same restart with nothing mounted (what starting costs anyway).
// Run: node bench/restart.bench.ts [--volumes=2000] [--smoke]   (env BENCH_VOLUMES)
import { mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { manifestStream, threeVolumePod } from './baseline.ts';
import {
  ensureMountNamespace,
  figure,
  goal,
  header,
  mountIdsBelow,
  size,
  startPodvol,
  tempRoot,
  until,
  waitLines,
} from './lib.ts';

ensureMountNamespace();
const PODS = Math.ceil(size('volumes', 2000, 9) / 3);
const VOLUMES = PODS * 3;

async function restartToReady(rootDir: string, manifests: string) {
  const p = await startPodvol({ rootDir, manifests });
  try {
    const readyAt = await p.until200('/readyz', 5, 600_000);
    // Let the first reconciler passes after ready run: a remount would show up here.
    await new Promise((r) => setTimeout(r, 1500));
    return { ms: readyAt - p.spawnedAt, mounts: p.count('Mounting'), unmounts: p.count('Unmounting') };
  } finally {
    await p.stop();
  }
}

const tmp = tempRoot('p5');
try {
  header('P5 restart with mounted volumes → /readyz', { pods: PODS, volumes: VOLUMES });
  const manifests = join(tmp.dir, 'manifests');
  const emptyManifests = join(tmp.dir, 'empty');
  const root = join(tmp.dir, 'root');
  mkdirSync(manifests);
  mkdirSync(emptyManifests);

  const empty = await restartToReady(join(tmp.dir, 'empty-root'), emptyManifests);

  writeFileSync(
    join(manifests, 'pods.yaml'),
    manifestStream(Array.from({ length: PODS }, (_, i) => threeVolumePod(i))),
  );
  const first = await startPodvol({ rootDir: root, manifests });
  try {
    await waitLines(first, 'MountVolume.SetUp succeeded', VOLUMES);
  } finally {
    await first.stop();
  }
  const before = mountIdsBelow(root);
  if (before.length !== VOLUMES)
    throw new Error(`${before.length} mounts below the root, expected ${VOLUMES}`);

  const full = await restartToReady(root, manifests);
  const after = mountIdsBelow(root);
  const same = after.length === before.length && after.every((id, i) => id === before[i]);

  figure('restart, nothing mounted: spawn → /readyz 200', empty.ms, 'ms');
  figure(`restart, ${VOLUMES} volumes mounted: spawn → /readyz 200`, full.ms, 'ms', {
    name: 'nothing mounted',
    value: empty.ms,
  });
  console.log(
    `mount calls after restart: ${full.mounts}, umount calls: ${full.unmounts}; mount table below the root ${same ? 'unchanged' : 'CHANGED'}`,
  );
  goal('P5 restart → /readyz', full.ms / 1000, 1.5, ' s');
  goal('P5 mount calls', full.mounts, 0, '');

  // Tear everything down through podvol, as an operator would.
  unlinkSync(join(manifests, 'pods.yaml'));
  const last = await startPodvol({ rootDir: root, manifests });
  try {
    await until('pods torn down', () => readdirSync(join(root, 'pods')).length === 0, 50);
  } finally {
    await last.stop();
  }
} finally {
  tmp.cleanup();
}
