// A volume manager over the fake mounter and a real temp root, for tests that
// drive the reconciler by hand. Events are recorded in `events`.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { V1Pod, V1Volume } from '@kubernetes/client-node';
import { pino } from 'pino';
import { VolumeManager, type VolumeManagerOptions } from '../../../src/agent/volumemanager/volume-manager.ts';
import type { Clock } from '../../../src/clock.ts';
import { probeVolumePlugins } from '../../../src/plugins/index.ts';
import type { FsOps } from '../../../src/volumehost/fs.ts';
import { createVolumeHost } from '../../../src/volumehost/host.ts';
import { VolumePluginMgr } from '../../../src/volumehost/plugin-manager.ts';
import type { EventRecorder } from '../../../src/volumehost/types.ts';
import { FakeMounter } from '../../helpers/fake-mounter.ts';
import { podWith } from '../../helpers/pods.ts';

/** Pod p-<uid> of namespace default whose container mounts every volume at /<name>. */
export const pod = (uid: string, volumes: V1Volume[] | undefined): V1Pod =>
  podWith(volumes, {}, { name: `p-${uid}`, namespace: 'default', uid });

/** `opts.root` reuses another harness's root directory: a restart. */
export async function harness(
  t: TestContext,
  initialPods: V1Pod[],
  opts: Partial<
    Pick<
      VolumeManagerOptions,
      | 'settlePeriodMs'
      | 'loopPeriodMs'
      | 'housekeepingPeriodMs'
      | 'volumeStatsPeriodMs'
      | 'metrics'
      | 'maxConcurrentOperations'
      | 'claims'
      | 'logger'
    >
  > & {
    root?: string;
    /** Another harness's mounter, whose mounts are still there: a restart of podvol, not of the node. */
    mounter?: FakeMounter;
    /** The manager's clock: its time and, once started, its loop's timer (default the system's). */
    clock?: Clock;
    /** The filesystem the host hands plugins and the operations (default the host's). */
    fs?: FsOps;
  } = {},
) {
  const root = opts.root ?? (await mkdtemp(join(tmpdir(), 'podvol-vm-')));
  if (!opts.root) t.after(() => rm(root, { recursive: true, force: true }));
  const mounter = opts.mounter ?? new FakeMounter();
  const pluginMgr = new VolumePluginMgr();
  const events: Parameters<EventRecorder['eventf']>[] = [];
  const host = createVolumeHost({
    rootDir: root,
    nodeName: 'n',
    mounter,
    pluginMgr,
    fs: opts.fs,
    cluster: { eventRecorder: { eventf: (...e) => events.push(e) } },
  });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  let pods = initialPods;
  let ready = false;
  const vm = new VolumeManager({
    rootDir: root,
    host,
    pluginMgr,
    mounter,
    logger: opts.logger ?? pino({ level: 'silent' }),
    pods: () => pods,
    sourcesReady: () => ready,
    clock: opts.clock,
    settlePeriodMs: opts.settlePeriodMs,
    loopPeriodMs: opts.loopPeriodMs,
    housekeepingPeriodMs: opts.housekeepingPeriodMs,
    volumeStatsPeriodMs: opts.volumeStatsPeriodMs,
    metrics: opts.metrics,
    maxConcurrentOperations: opts.maxConcurrentOperations,
    claims: opts.claims,
  });
  await vm.reconstruct();
  const settle = async () => {
    for (let i = 0; i < 5; i++) {
      await vm.reconcileOnce();
      await vm.executor.drain();
      await vm.stats.settle();
    }
  };
  return {
    root,
    vm,
    mounter,
    host,
    pluginMgr,
    events,
    setPods(p: V1Pod[]) {
      pods = p;
      vm.podsChanged();
    },
    setReady(r: boolean) {
      ready = r;
    },
    settle,
  };
}
