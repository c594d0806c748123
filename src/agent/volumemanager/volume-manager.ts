// kubelet's volume manager: a desired state filled from the pod sources, an
// actual state filled only by operation results and reconstruction, and a
// reconciler between them that runs every 100 ms. Nothing is unmounted before
// the pod sources have synced; stopping unmounts nothing.
import { mkdir, readdir, rm } from 'node:fs/promises';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../logger.ts';
import type * as mount from '../../mount/types.ts';
import type { VolumePluginMgr } from '../../plugins/plugin-manager.ts';
import { type MounterArgs, reasonOf } from '../../plugins/types.ts';
import {
  podDir,
  podPluginsDir,
  podsDir,
  podVolumeRecordsDir,
  podVolumeRecordsRoot,
  podVolumesDir,
  unescapeQualifiedName,
} from '../../volumehost/paths.ts';
import { mountPointsBelow, removeAllOneFilesystem } from '../../volumehost/removeall.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { ActualStateOfWorld, type MountedVolume } from './actual-state.ts';
import { DesiredStateOfWorld, type VolumeToMount, volumeKey } from './desired-state.ts';
import { OperationExecutor } from './operation-executor.ts';
import { readRecord, removeRecord, writeRecord } from './records.ts';
import { buildStatus, type PodStatus } from './status.ts';

export interface VolumeManagerMetrics {
  operation(plugin: string, operation: 'volume_mount' | 'volume_unmount', ok: boolean, seconds: number): void;
  operationError(operation: string, reason: string): void;
  reconcile(seconds: number): void;
  reconstructed(ok: boolean): void;
}

export interface VolumeManagerOptions {
  rootDir: string;
  host: VolumeHost;
  pluginMgr: VolumePluginMgr;
  mounter: mount.Interface;
  logger: Logger;
  /** Current pods of every source, merged and unique by UID. */
  pods: () => V1Pod[];
  /** True once every pod source has listed everything at least once. */
  sourcesReady: () => boolean;
  metrics?: VolumeManagerMetrics;
  loopPeriodMs?: number;
  housekeepingPeriodMs?: number;
  /** kubelet's syncFrequency: how often remount-requiring volumes (tokens, downwardAPI...) are refreshed. */
  resyncPeriodMs?: number;
  now?: () => number;
}

const noMetrics: VolumeManagerMetrics = {
  operation() {},
  operationError() {},
  reconcile() {},
  reconstructed() {},
};

/** kubelet's FsUserFrom: the runAsUser every container agrees on, if any. */
function fsUserFrom(pod: V1Pod): number | undefined {
  const users = new Set<number | undefined>();
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]) {
    users.add(c.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser);
  }
  if (users.size !== 1) return undefined;
  return [...users][0];
}

export function mounterArgsFor(pod: V1Pod): MounterArgs {
  return {
    fsUser: fsUserFrom(pod),
    fsGroup: pod.spec?.securityContext?.fsGroup,
    fsGroupChangePolicy: pod.spec?.securityContext?.fsGroupChangePolicy,
  };
}

/**
 * JSON with sorted keys and without null/undefined members: the same volume
 * from a list (client-node model objects), a watch event (plain JSON) or a
 * record on disk must compare equal whatever the key order.
 */
export function canonicalJSON(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .filter((k) => v[k] !== undefined && v[k] !== null)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}

const sameSpec = (v: MountedVolume, d: VolumeToMount) =>
  !v.specExact || canonicalJSON(v.spec.volume) === canonicalJSON(d.spec?.volume);

export class VolumeManager {
  readonly dsw = new DesiredStateOfWorld();
  readonly asw = new ActualStateOfWorld();
  readonly executor: OperationExecutor;
  readonly #o: Required<Omit<VolumeManagerOptions, 'metrics'>> & { metrics: VolumeManagerMetrics };
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;
  #reconstructed = false;
  #populated = false;
  #podsDirty = true;
  #lastHousekeeping = 0;
  #lastResync = 0;
  #lastTick = 0;
  readonly #housekeepingErrors = new Map<string, string>();

  constructor(opts: VolumeManagerOptions) {
    this.#o = {
      loopPeriodMs: 100,
      housekeepingPeriodMs: 2000,
      resyncPeriodMs: 60_000,
      now: Date.now,
      metrics: noMetrics,
      // An option passed as undefined keeps its default.
      ...(Object.fromEntries(
        Object.entries(opts).filter(([, v]) => v !== undefined),
      ) as VolumeManagerOptions),
    };
    this.executor = new OperationExecutor(this.#o.now);
  }

  /** Rebuilds the actual state from disk, then starts the reconciler loop. */
  async start(): Promise<void> {
    await this.reconstruct();
    const loop = () => {
      this.#timer = setTimeout(async () => {
        await this.reconcileOnce();
        if (this.#timer) loop();
      }, this.#o.loopPeriodMs);
    };
    loop();
  }

  /** Stops the loop and waits for running operations; unmounts nothing. */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.executor.drain();
  }

  /** The pod sources changed; the next pass re-reads them. */
  podsChanged(): void {
    this.#podsDirty = true;
  }

  /** An object a remount-requiring volume renders changed (e.g. a configMap): refresh those volumes. */
  markRemountRequired(predicate: (v: MountedVolume) => boolean): void {
    for (const v of this.asw.all()) if (predicate(v)) v.remountRequired = true;
  }

  isAlive(): boolean {
    return this.#lastTick === 0 || this.#o.now() - this.#lastTick < 30_000;
  }

  isReady(): boolean {
    return this.#reconstructed && this.#populated;
  }

  status(): PodStatus[] {
    return buildStatus(this.dsw, this.asw, this.executor, this.#housekeepingErrors);
  }

  async reconstruct(): Promise<void> {
    const root = this.#o.rootDir;
    for (const uid of await readdirOrEmpty(podsDir(root))) {
      for (const escaped of await readdirOrEmpty(podVolumesDir(root, uid))) {
        const pluginName = unescapeQualifiedName(escaped);
        for (const volumeName of await readdirOrEmpty(`${podVolumesDir(root, uid)}/${escaped}`)) {
          await this.#reconstructVolume(uid, pluginName, volumeName);
        }
      }
    }
    this.#reconstructed = true;
  }

  async #reconstructVolume(uid: string, pluginName: string, volumeName: string): Promise<void> {
    const key = volumeKey(uid, volumeName);
    if (this.asw.get(key)) return;
    try {
      const plugin = this.#o.pluginMgr.findPluginByName(pluginName);
      const record = await readRecord(this.#o.rootDir, uid, pluginName, volumeName);
      const path = `${podVolumesDir(this.#o.rootDir, uid)}/${plugin.name.replaceAll('/', '~')}/${volumeName}`;
      const spec = record
        ? { volume: record.volume, readOnly: record.readOnly }
        : plugin.constructVolumeSpec(volumeName, path);
      this.asw.set({
        key,
        podUID: uid,
        podNamespace: record?.podNamespace ?? '',
        podName: record?.podName ?? '',
        volumeName,
        pluginName,
        spec,
        path,
        state: 'uncertain',
        remountRequired: false,
        specExact: record !== undefined,
        reconstructed: true,
      });
      this.#o.metrics.reconstructed(true);
      this.#o.logger.info(
        { podUID: uid, volume: volumeName, plugin: pluginName, record: Boolean(record) },
        'reconstructed volume',
      );
    } catch (err) {
      this.#o.metrics.reconstructed(false);
      this.#o.metrics.operationError('reconstruct', reasonOf(err, 'ReconstructFailed'));
      this.#o.logger.error(
        { podUID: uid, volume: volumeName, plugin: pluginName, err: (err as Error).message },
        'could not reconstruct volume',
      );
    }
  }

  /** One reconciler pass; exported for tests that step the loop by hand. */
  async reconcileOnce(): Promise<void> {
    if (this.#ticking || !this.#reconstructed) return;
    this.#ticking = true;
    const started = performance.now();
    try {
      this.#lastTick = this.#o.now();
      if (this.#podsDirty) {
        this.#podsDirty = false;
        const changed = this.dsw.replace(this.#o.pods(), this.#o.pluginMgr, this.#o.host);
        for (const uid of changed) {
          this.asw.markRemountRequired(uid, (v) => this.dsw.volume(v.key)?.requiresRemount ?? false);
        }
      }
      if (this.#o.now() - this.#lastResync >= this.#o.resyncPeriodMs) {
        this.#lastResync = this.#o.now();
        this.markRemountRequired(
          (v) => v.state === 'mounted' && (this.dsw.volume(v.key)?.requiresRemount ?? false),
        );
      }
      const ready = this.#o.sourcesReady();
      if (ready) this.#populated = true;
      if (ready) this.#unmountVolumes();
      this.#mountVolumes();
      if (ready && this.#o.now() - this.#lastHousekeeping >= this.#o.housekeepingPeriodMs) {
        this.#lastHousekeeping = this.#o.now();
        await this.#cleanupOrphanedPodDirs();
      }
    } catch (err) {
      this.#o.logger.error({ err: (err as Error).message }, 'reconciler pass failed');
    } finally {
      this.#o.metrics.reconcile((performance.now() - started) / 1000);
      this.#ticking = false;
    }
  }

  #unmountVolumes(): void {
    for (const v of this.asw.all()) {
      const d = this.dsw.volume(v.key);
      if (d && !d.problem && d.pluginName === v.pluginName && sameSpec(v, d)) continue;
      this.executor.run(v.key, 'volume_unmount', () => this.#unmount(v));
    }
  }

  #mountVolumes(): void {
    for (const d of this.dsw.volumesToMount()) {
      const v = this.asw.get(d.key);
      if (v && (v.pluginName !== d.pluginName || !sameSpec(v, d))) continue; // unmount first
      if (v && v.state === 'mounted' && !v.remountRequired) continue;
      const pod = this.dsw.pod(d.podUID)?.pod;
      if (!pod) continue;
      this.executor.run(d.key, 'volume_mount', () => this.#mount(d, pod, v));
    }
  }

  async #mount(d: VolumeToMount, pod: V1Pod, prev: MountedVolume | undefined): Promise<void> {
    const { logger, metrics, pluginMgr, rootDir, host } = this.#o;
    const pluginName = d.pluginName as string;
    const spec = d.spec as NonNullable<VolumeToMount['spec']>;
    const log = {
      pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`,
      podUID: d.podUID,
      volume: d.volumeName,
      plugin: pluginName,
    };
    if (prev) prev.remountRequired = false;
    const t0 = performance.now();
    const base: MountedVolume = {
      key: d.key,
      podUID: d.podUID,
      podNamespace: pod.metadata?.namespace ?? '',
      podName: pod.metadata?.name ?? '',
      volumeName: d.volumeName,
      pluginName,
      spec,
      path: d.path ?? '',
      state: 'uncertain',
      remountRequired: prev?.remountRequired ?? false,
      specExact: true,
      reconstructed: prev?.reconstructed ?? false,
    };
    try {
      const mounter = pluginMgr.findPluginByName(pluginName).newMounter(spec, pod);
      // kubelet's makePodDataDirs: the pod, volumes and plugins directories, 0750.
      await mkdir(podVolumesDir(rootDir, d.podUID), { recursive: true, mode: 0o750 });
      await mkdir(podPluginsDir(rootDir, d.podUID), { recursive: true, mode: 0o750 });
      // The record is written before SetUp so that a crash half-way leaves enough to tear it down.
      await writeRecord(rootDir, {
        version: 1,
        podUID: d.podUID,
        podNamespace: base.podNamespace,
        podName: base.podName,
        volumeName: d.volumeName,
        pluginName,
        volume: spec.volume ?? { name: d.volumeName },
        readOnly: spec.readOnly,
      }).catch(() => {});
      await mounter.setUp(mounterArgsFor(pod));
    } catch (err) {
      const seconds = (performance.now() - t0) / 1000;
      const reason = reasonOf(err, 'MountFailed');
      metrics.operation(pluginName, 'volume_mount', false, seconds);
      metrics.operationError('volume_mount', reason);
      // Whatever SetUp left behind must be torn down if the pod goes away.
      this.asw.set({
        ...base,
        state: prev?.state === 'mounted' ? 'mounted' : 'uncertain',
        remountRequired: prev?.state === 'mounted',
      });
      const message = (err as Error).message;
      logger.warn(
        { ...log, durationMs: Math.round(seconds * 1000), reason, err: message },
        'MountVolume.SetUp failed',
      );
      host
        .getEventRecorder()
        .eventf(
          pod,
          'Warning',
          'FailedMount',
          `MountVolume.SetUp failed for volume "${d.volumeName}" : ${message}`,
        );
      throw err;
    }
    const seconds = (performance.now() - t0) / 1000;
    metrics.operation(pluginName, 'volume_mount', true, seconds);
    const current = this.asw.get(d.key);
    this.asw.set({ ...base, state: 'mounted', remountRequired: current?.remountRequired ?? false });
    logger.info(
      { ...log, durationMs: Math.round(seconds * 1000), remount: prev !== undefined },
      'MountVolume.SetUp succeeded',
    );
  }

  async #unmount(v: MountedVolume): Promise<void> {
    const { logger, metrics, pluginMgr, rootDir } = this.#o;
    const log = {
      pod: `${v.podNamespace}/${v.podName}`,
      podUID: v.podUID,
      volume: v.volumeName,
      plugin: v.pluginName,
    };
    const t0 = performance.now();
    try {
      await pluginMgr.findPluginByName(v.pluginName).newUnmounter(v.volumeName, v.podUID).tearDown();
    } catch (err) {
      const seconds = (performance.now() - t0) / 1000;
      const reason = reasonOf(err, 'UnmountFailed');
      metrics.operation(v.pluginName, 'volume_unmount', false, seconds);
      metrics.operationError('volume_unmount', reason);
      v.state = 'uncertain';
      logger.warn(
        { ...log, durationMs: Math.round(seconds * 1000), reason, err: (err as Error).message },
        'UnmountVolume.TearDown failed',
      );
      throw err;
    }
    const seconds = (performance.now() - t0) / 1000;
    metrics.operation(v.pluginName, 'volume_unmount', true, seconds);
    this.asw.delete(v.key);
    await removeRecord(rootDir, v.podUID, v.pluginName, v.volumeName);
    logger.info({ ...log, durationMs: Math.round(seconds * 1000) }, 'UnmountVolume.TearDown succeeded');
  }

  /**
   * kubelet's cleanupOrphanedPodDirs, without its worst failure mode: a pod
   * directory with no mount below it is removed even if files remain, because
   * the mount table (not a guess) says nothing mounted would be deleted.
   */
  async #cleanupOrphanedPodDirs(): Promise<void> {
    const { rootDir, mounter, logger } = this.#o;
    const podDirs = new Set(await readdirOrEmpty(podsDir(rootDir)));
    for (const uid of await readdirOrEmpty(podVolumeRecordsRoot(rootDir))) {
      // Records never hold a mount; once their pod directory is gone they describe nothing.
      if (
        !podDirs.has(uid) &&
        !this.dsw.pod(uid) &&
        !this.asw.hasPod(uid) &&
        !this.executor.anyPending(`${uid}/`)
      ) {
        await rm(podVolumeRecordsDir(rootDir, uid), { recursive: true, force: true });
      }
    }
    for (const uid of await readdirOrEmpty(podsDir(rootDir))) {
      // A SetUp still running for a pod that just went away must finish first: it records its result in ASW.
      if (this.dsw.pod(uid) || this.asw.hasPod(uid) || this.executor.anyPending(`${uid}/`)) {
        this.#housekeepingErrors.delete(uid);
        continue;
      }
      const dir = podDir(rootDir, uid);
      try {
        const mounts = await mountPointsBelow(mounter, dir);
        if (mounts.length === 0) {
          await removeAllOneFilesystem(mounter, dir);
          await rm(podVolumeRecordsDir(rootDir, uid), { recursive: true, force: true });
          this.#housekeepingErrors.delete(uid);
          logger.info({ podUID: uid }, 'removed orphaned pod directory');
          continue;
        }
        // Mounted volumes nobody knows about (a crash before the record was written,
        // or a volume added behind our back): adopt them so the reconciler tears them down.
        const volumesDir = `${podVolumesDir(rootDir, uid)}/`;
        let adopted = 0;
        for (const mp of mounts) {
          const rest = mp.startsWith(volumesDir) ? mp.slice(volumesDir.length).split('/') : [];
          if (rest.length !== 2) continue;
          await this.#reconstructVolume(uid, unescapeQualifiedName(rest[0]), rest[1]);
          adopted++;
        }
        if (adopted < mounts.length) {
          const msg = `orphaned pod directory still has mounts podvol cannot attribute to a volume: ${mounts.join(', ')}`;
          this.#housekeepingErrors.set(uid, msg);
          this.#o.metrics.operationError('orphan_cleanup', 'MountsRemain');
          logger.warn({ podUID: uid }, msg);
        }
      } catch (err) {
        this.#housekeepingErrors.set(uid, (err as Error).message);
        this.#o.metrics.operationError('orphan_cleanup', reasonOf(err, 'CleanupFailed'));
        logger.warn({ podUID: uid, err: (err as Error).message }, 'could not remove orphaned pod directory');
      }
    }
  }
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR')
      return [];
    throw err;
  }
}
