// kubelet's volume manager: a desired state filled by the populator from the pod
// sources, an actual state filled only by operation results and reconstruction,
// and a reconciler between them that runs every 100 ms, and at once when the
// pods change, an object changes or an operation ends (kick()). Nothing is unmounted
// before the pod sources have synced; stopping unmounts nothing. The parts live
// in their own files under kubelet's names; this one wires them and runs the loop.
import type { V1Pod } from '@kubernetes/client-node';
import { type Clock, systemClock, type Timer } from '../../clock.ts';
import { errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import type * as mount from '../../mount/types.ts';
import type { ClaimLookup } from '../../volumehost/kube/claims.ts';
import type { VolumePluginMgr } from '../../volumehost/plugin-manager.ts';
import type { SafeFs } from '../../volumehost/safe-fs.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { ActualStateOfWorld, type MountedVolume } from './actual-state.ts';
import {
  podHasVolumes,
  SYNC_FREQUENCY_MS,
  TEARDOWN_SETTLE_PERIOD_MS,
  type VolumeManagerContext,
  type VolumeManagerMetrics,
} from './context.ts';
import { DesiredStateOfWorld } from './desired-state.ts';
import { freshRead } from './fresh-read.ts';
import { defaultMaxConcurrentOperations, type Operation, OperationExecutor } from './operation-executor.ts';
import { cleanupOrphanedPodDirs } from './orphan-cleanup.ts';
import { DesiredStateOfWorldPopulator } from './populator.ts';
import {
  createSpecChange,
  mountVolumes,
  unmountDevices,
  unmountVolumes,
  volumesToUnmount,
} from './reconciler.ts';
import { cleanOrphanVolumes, type FailedReconstruction, reconstructVolumes } from './reconstruction.ts';
import { SettleGuard, type TeardownHold } from './settle-guard.ts';
import { buildStatus, type PodStatus, type Terminating } from './status.ts';
import { EmptyDirStats } from './volume-stats.ts';

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
  /**
   * Time for backoff, ages, the settle guard and housekeeping periods, and the
   * loop's timer (default the system's): a fake clock runs the loop only when advanced.
   */
  clock?: Clock;
  /** PersistentVolumeClaims and PersistentVolumes (cluster mode). */
  claims?: ClaimLookup;
  /**
   * How long a first sync that looks like a configuration mistake is held
   * before it is checked again (see settle-guard.ts); 0 disables the hold.
   */
  settlePeriodMs?: number;
  /** The operation pool: mount and unmount operations running at once (default from the CPUs). */
  maxConcurrentOperations?: number;
  /** Extra housekeeping once the sources have synced (the CSI plugin's orphaned staged volumes). */
  housekeeping?: () => Promise<void>;
  /** The step a running SetUp is at, for /status (the CSI plugin's attaching, staging, publishing). */
  phaseOf?: (podUID: string, innerName: string, pluginName: string) => string | undefined;
  /** How often emptyDir usage is measured (kubelet's --volume-stats-agg-period, 1 min); 0 disables it. */
  volumeStatsPeriodMs?: number;
  /** See VolumeManagerContext: the runtime contract's hold on pods no longer desired. */
  heldPod?: (uid: string) => Terminating | undefined;
  /** See VolumeManagerContext: subPath mounts removed before their volume. */
  cleanSubPaths?: (podUID: string, innerName: string, fs: SafeFs) => Promise<void>;
}

const noMetrics: VolumeManagerMetrics = {
  operation() {},
  operationError() {},
  reconcile() {},
  reconstructed() {},
};

export class VolumeManager {
  readonly dsw: DesiredStateOfWorld;
  /** The clock's time (ms since the epoch), for the parts that need only that. */
  readonly #now: () => number;
  readonly asw = new ActualStateOfWorld(() => this.#notify());
  readonly executor: OperationExecutor;
  /** Compares desired and mounted specs; caches each spec's canonical JSON for this manager's state. */
  readonly #specChange = createSpecChange();
  /** Called after anything /status shows may have changed (see subscribe). */
  readonly #listeners = new Set<() => void>();
  readonly #o: Required<
    Omit<
      VolumeManagerOptions,
      'metrics' | 'claims' | 'housekeeping' | 'phaseOf' | 'volumeStatsPeriodMs' | 'heldPod' | 'cleanSubPaths'
    >
  > &
    Pick<
      VolumeManagerOptions,
      'claims' | 'housekeeping' | 'phaseOf' | 'volumeStatsPeriodMs' | 'heldPod' | 'cleanSubPaths'
    > & {
      metrics: VolumeManagerMetrics;
    };
  /** emptyDir usage against sizeLimit. */
  readonly stats: EmptyDirStats;
  readonly #ctx: VolumeManagerContext;
  readonly #populator: DesiredStateOfWorldPopulator;
  readonly #settle: SettleGuard;
  /** The loop's next tick, on the clock; undefined before start() and after stop(). */
  #timer: Timer | undefined;
  /** The reconciler pass the loop is running, if any (stop() waits for it). */
  #pass: Promise<void> | undefined;
  #ticking = false;
  /** A pass is scheduled by kick(), or was asked for while one ran. */
  #kicked = false;
  #again = false;
  /** A volume was torn down since the last housekeeping: its pod directory may go now, not at the next period. */
  #housekeepingDue = false;
  #reconstructed = false;
  #populated = false;
  #lastHousekeeping = 0;
  #lastTick = 0;
  readonly #housekeepingErrors = new Map<string, string>();
  /** Volumes that failed reconstruction, cleaned once the desired state is complete (one shot, as kubelet). */
  #failedReconstruction: FailedReconstruction[] = [];

  constructor(opts: VolumeManagerOptions) {
    // An option passed as undefined keeps its default.
    this.#o = {
      ...opts,
      loopPeriodMs: opts.loopPeriodMs ?? 100,
      housekeepingPeriodMs: opts.housekeepingPeriodMs ?? 2000,
      resyncPeriodMs: opts.resyncPeriodMs ?? SYNC_FREQUENCY_MS,
      settlePeriodMs: opts.settlePeriodMs ?? TEARDOWN_SETTLE_PERIOD_MS,
      maxConcurrentOperations: opts.maxConcurrentOperations ?? defaultMaxConcurrentOperations(),
      clock: opts.clock ?? systemClock(),
      metrics: opts.metrics ?? noMetrics,
    };
    const clock = this.#o.clock;
    this.#now = () => clock.now();
    this.dsw = new DesiredStateOfWorld(this.#now);
    this.executor = new OperationExecutor(
      this.#now,
      this.#o.maxConcurrentOperations,
      (name, ok) => {
        this.#notify();
        if (ok && name === 'volume_unmount') this.#housekeepingDue = true;
        // A pool slot is free: the volumes waiting for one start now.
        this.#kick();
      },
      // An operation waits on a filesystem without its slot: the same.
      () => this.#kick(),
    );
    const { rootDir, host, pluginMgr, mounter, logger, metrics } = this.#o;
    // One mount-table read shared by concurrent operations, begun after each asked (fresh-read.ts).
    const mountTable = freshRead(() => host.getMounter().list());
    this.#ctx = {
      rootDir,
      host,
      pluginMgr,
      mounter,
      logger,
      metrics,
      dsw: this.dsw,
      asw: this.asw,
      executor: this.executor,
      freshMountTable: () => mountTable.read(),
      specChange: this.#specChange,
      heldPod: this.#o.heldPod,
      cleanSubPaths: this.#o.cleanSubPaths,
    };
    this.stats = new EmptyDirStats(this.#ctx, { periodMs: this.#o.volumeStatsPeriodMs, now: this.#now });
    this.#settle = new SettleGuard({ settleMs: this.#o.settlePeriodMs, now: this.#now, logger });
    this.#populator = new DesiredStateOfWorldPopulator(this.#ctx, {
      pods: this.#o.pods,
      resyncPeriodMs: this.#o.resyncPeriodMs,
      now: this.#now,
      claims: this.#o.claims,
    });
  }

  /** Rebuilds the actual state from disk, then starts the reconciler loop. */
  async start(): Promise<void> {
    await this.reconstruct();
    const loop = () => {
      this.#timer = this.#o.clock.after(this.#o.loopPeriodMs, async () => {
        await this.reconcileOnce();
        if (this.#timer) loop();
      });
    };
    loop();
  }

  /**
   * Runs a pass as soon as the event loop is free instead of at the next tick:
   * a pod added or deleted, a changed object or a freed pool slot is acted on
   * within milliseconds (P1, P2, P3 in the README). Requests arriving while a
   * pass is scheduled or running make one more pass, not one each; the
   * periodic tick stays as the safety net. Nothing happens before start() or
   * after stop(), so tests that step the loop by hand are not disturbed.
   */
  #kick(): void {
    if (!this.#timer) return;
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    if (this.#kicked) return;
    this.#kicked = true;
    setImmediate(() => {
      this.#kicked = false;
      if (this.#timer) void this.reconcileOnce();
    });
  }

  /** Stops the loop and waits for running operations; unmounts nothing. */
  async stop(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    // A pass in progress (its housekeeping removes a pod directory, then the pod's records) ends first.
    await this.#pass;
    await this.executor.drain();
    await this.stats.settle();
  }

  /**
   * Calls `fn` after every change of the actual state (a volume mounted or
   * unmounted), of an operation's outcome (a failure and its reason) and of
   * the desired state (pods added, changed, gone): everything a pod's /status
   * entry is built from. The runtime API's waits are woken by it instead of
   * polling. Returns the unsubscribe function.
   */
  subscribe(fn: () => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  #notify(): void {
    for (const fn of this.#listeners) {
      try {
        fn();
      } catch (err) {
        this.#o.logger.error({ err: errorMessage(err) }, 'state change listener failed');
      }
    }
  }

  /** The pod sources changed; a pass re-reads them now. */
  podsChanged(): void {
    this.#populator.podsChanged();
    this.#kick();
  }

  /** An object a remount-requiring volume renders changed (e.g. a configMap): refresh those volumes now. */
  markRemountRequired(predicate: (v: MountedVolume) => boolean): void {
    this.#populator.markRemountRequired(predicate);
    this.#kick();
  }

  /** Something a plugin waits for appeared (a CSI driver registered): retry its volumes now, not after backoff. */
  retryPlugin(pluginName: string): void {
    for (const d of this.dsw.volumesToMount()) if (d.pluginName === pluginName) this.executor.forget(d.key);
    for (const v of this.asw.all()) if (v.pluginName === pluginName) this.executor.forget(v.key);
    for (const d of this.asw.devices()) if (d.pluginName === pluginName) this.executor.forget(d.deviceName);
    this.#kick();
  }

  /** Whether the pod has a volume in the actual state or an operation running for one. */
  podHasVolumes(uid: string): boolean {
    return podHasVolumes(this.#ctx, uid);
  }

  isAlive(): boolean {
    return this.#lastTick === 0 || this.#now() - this.#lastTick < 30_000;
  }

  isReady(): boolean {
    return this.#reconstructed && this.#populated;
  }

  /** A first-sync teardown being held by the settle guard, for /status. */
  teardownHold(): TeardownHold | undefined {
    return this.#settle.hold();
  }

  status(): PodStatus[] {
    return this.#status();
  }

  /** One pod's entry of status(), or undefined when podvol does not know the pod. */
  podStatus(uid: string): PodStatus | undefined {
    return this.#status(uid)[0];
  }

  #status(uid?: string): PodStatus[] {
    const usage = (key: string) => this.stats.get(key);
    const { dsw, asw, executor } = this;
    return buildStatus(
      dsw,
      asw,
      executor,
      this.#housekeepingErrors,
      this.#o.phaseOf,
      usage,
      this.#statusHooks,
      uid,
    );
  }

  readonly #statusHooks = {
    held: (uid: string) => this.#o.heldPod?.(uid),
    specChange: this.#specChange,
  };

  async reconstruct(): Promise<void> {
    this.#failedReconstruction = await reconstructVolumes(this.#ctx);
    this.#reconstructed = true;
  }

  /**
   * One reconciler pass; exported for tests that step the loop by hand. The
   * pass in flight, whoever started it (the tick, a kick, a test), is kept in
   * #pass so that stop() waits for it: a kicked pass's housekeeping removes a
   * pod directory and then its records, and a drain that stopped between the
   * two left `<root>/podvol` behind.
   */
  reconcileOnce(): Promise<void> {
    if (this.#ticking) {
      this.#again = true;
      return this.#pass ?? Promise.resolve();
    }
    if (!this.#reconstructed) return Promise.resolve();
    this.#pass = this.#reconcile();
    return this.#pass;
  }

  async #reconcile(): Promise<void> {
    this.#ticking = true;
    const started = performance.now();
    try {
      this.#lastTick = this.#now();
      if (this.#populator.populate()) this.#notify();
      const ready = this.#o.sourcesReady();
      if (ready) this.#populated = true;
      // The pass's unmounts and mounts are offered to the pool together (it shares
      // its slots between the pods that wait), computed and offered with no await
      // between, so each is decided on the states as they are.
      const operations: Operation[] = [];
      if (ready) {
        const toUnmount = volumesToUnmount(this.#ctx);
        // The devices no pod uses any more after them (kubelet's unmountDetachDevices), held with the teardowns.
        if (this.#settle.allow(this.asw.all(), toUnmount, this.dsw.size))
          operations.push(...unmountVolumes(this.#ctx, toUnmount), ...unmountDevices(this.#ctx));
      }
      operations.push(...mountVolumes(this.#ctx));
      this.executor.offer(operations);
      // As kubelet's reconcileNew, after the mounts: no operation is for a volume it cleans (those
      // failed reconstruction and no pod wants them), and its deadlines delay no operation.
      if (ready && this.#failedReconstruction.length > 0) {
        const failed = this.#failedReconstruction;
        this.#failedReconstruction = [];
        await cleanOrphanVolumes(this.#ctx, failed);
      }
      this.stats.tick();
      const held = this.#settle.hold() !== undefined;
      const due =
        this.#housekeepingDue || this.#now() - this.#lastHousekeeping >= this.#o.housekeepingPeriodMs;
      if (ready && !held && due) {
        this.#lastHousekeeping = this.#now();
        this.#housekeepingDue = false;
        await cleanupOrphanedPodDirs(this.#ctx, this.#housekeepingErrors);
        await this.#o
          .housekeeping?.()
          .catch((err: Error) => this.#o.logger.warn({ err: err.message }, 'housekeeping failed'));
      }
    } catch (err) {
      this.#o.logger.error({ err: errorMessage(err) }, 'reconciler pass failed');
    } finally {
      this.#o.metrics.reconcile((performance.now() - started) / 1000);
      this.#ticking = false;
      if (this.#again) {
        this.#again = false;
        this.#kick();
      }
    }
  }
}
