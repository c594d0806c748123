// emptyDir usage: measured as du does, at most once per volume stats period,
// shown in /status with the sizeLimit; exceeding the limit is a Warning Event
// and reason SizeLimitExceeded (kubelet would evict the pod; podvol reports).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { VolumeManager } from '../../../src/agent/volumemanager/volume-manager.ts';
import { FakeMounter } from '../../../src/mount/fake.ts';
import { probeVolumePlugins } from '../../../src/plugins/index.ts';
import { VolumePluginMgr } from '../../../src/plugins/plugin-manager.ts';
import { createVolumeHost } from '../../../src/volumehost/host.ts';
import type { VolumeHost } from '../../../src/volumehost/types.ts';

const pod: V1Pod = {
  metadata: { name: 'writer', namespace: 'default', uid: 'stats-1' },
  spec: {
    containers: [
      {
        name: 'c',
        image: 'i',
        volumeMounts: [
          { name: 'small', mountPath: '/small' },
          { name: 'free', mountPath: '/free' },
        ],
      },
    ],
    volumes: [
      { name: 'small', emptyDir: { sizeLimit: '16Ki' } },
      { name: 'free', emptyDir: {} },
    ],
  },
};

test('emptyDir usage and sizeLimit in /status; exceeding it is a Warning Event and SizeLimitExceeded', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'podvol-stats-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const mounter = new FakeMounter();
  const pluginMgr = new VolumePluginMgr();
  const base = createVolumeHost({ rootDir: root, nodeName: 'n', mounter, pluginMgr });
  const events: unknown[][] = [];
  const host: VolumeHost = Object.assign(Object.create(base), {
    getEventRecorder: () => ({ eventf: (...args: unknown[]) => events.push(args) }),
  });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  let clock = 1_000_000;
  const vm = new VolumeManager({
    rootDir: root,
    host,
    pluginMgr,
    mounter,
    logger: pino({ level: 'silent' }),
    pods: () => [pod],
    sourcesReady: () => true,
    now: () => clock,
  });
  await vm.reconstruct();
  const settle = async () => {
    for (let i = 0; i < 5; i++) {
      await vm.reconcileOnce();
      await vm.executor.drain();
      await vm.stats.settle();
    }
  };
  await settle();
  const volume = (name: string) => vm.status()[0].volumes.find((v) => v.name === name);
  assert.equal(volume('small')?.state, 'mounted');
  assert.equal(volume('small')?.sizeLimit, '16Ki');
  assert.equal(volume('free')?.sizeLimit, undefined);
  assert.equal(typeof volume('free')?.usedBytes, 'number');

  const dir = join(root, 'pods/stats-1/volumes/kubernetes.io~empty-dir/small');
  await writeFile(join(dir, 'big'), Buffer.alloc(64 * 1024, 1));
  // Within the period nothing is measured again: large trees are not walked more often than kubelet's 1 min.
  clock += 30_000;
  await settle();
  assert.equal(volume('small')?.reason, '');
  clock += 30_000;
  await settle();
  const small = volume('small');
  assert.ok((small?.usedBytes ?? 0) >= 64 * 1024, JSON.stringify(small));
  assert.equal(small?.state, 'mounted');
  assert.equal(small?.reason, 'SizeLimitExceeded');
  assert.equal(small?.message, 'Usage of EmptyDir volume "small" exceeds the limit "16Ki".');
  assert.deepEqual(
    events.map((e) => e.slice(1)),
    [['Warning', 'SizeLimitExceeded', 'Usage of EmptyDir volume "small" exceeds the limit "16Ki".']],
  );
  // Still over at the next measurement: one Event per crossing, not one per minute.
  clock += 60_000;
  await settle();
  assert.equal(events.length, 1);
  assert.equal(volume('free')?.reason, '');
});

test('--volume-stats-agg-period 0 disables the measurement: no usage, no SizeLimitExceeded', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'podvol-stats-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const mounter = new FakeMounter();
  const pluginMgr = new VolumePluginMgr();
  const host = createVolumeHost({ rootDir: root, nodeName: 'n', mounter, pluginMgr });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  let clock = 1_000_000;
  const vm = new VolumeManager({
    rootDir: root,
    host,
    pluginMgr,
    mounter,
    logger: pino({ level: 'silent' }),
    pods: () => [pod],
    sourcesReady: () => true,
    now: () => clock,
    volumeStatsPeriodMs: 0,
  });
  await vm.reconstruct();
  const dir = join(root, 'pods/stats-1/volumes/kubernetes.io~empty-dir/small');
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 5; i++) {
      await vm.reconcileOnce();
      await vm.executor.drain();
      await vm.stats.settle();
    }
    if (round === 0) await writeFile(join(dir, 'big'), Buffer.alloc(64 * 1024, 1));
    clock += 120_000;
  }
  const small = vm.status()[0].volumes.find((v) => v.name === 'small');
  assert.equal(small?.state, 'mounted');
  assert.equal(small?.usedBytes, undefined);
  assert.equal(small?.reason, '');
});
