// A list+watch reflector (client-go's Reflector + a keyed store), built on
// client-node's Watch for the stream and a generated list call for the
// snapshot. We do not use client-node's ListWatch informer: it keys objects by
// namespace/name (not UID), stops for good on any error other than 410 and
// timeouts, and says nothing about whether it has synced.
//
// Why client-node's Watch rather than raw fetch: it owns auth, TLS, proxies and
// its own inactivity timeout (30 s) that cuts half-open streams; our watchdog
// here is the second line for a stream that stays silent past its lifetime.
import type { KubeConfig, V1ListMeta } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import { type Clock, systemClock, type Timer } from '../../clock.ts';
import { fieldOf } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { classifyError, type ReflectorError } from './api-errors.ts';
import { type KubeObject, type ReflectorEvent, Store } from './store.ts';

export interface KubeList<T> {
  metadata?: V1ListMeta;
  items: T[];
}

export interface ListOptions {
  fieldSelector?: string;
  labelSelector?: string;
}

export type RestartReason = 'closed' | 'expired' | 'error' | 'watchdog' | 'timeout';

export interface ReflectorOptions<T extends KubeObject> {
  /** What is reflected, for messages and logs, e.g. `pods on node n1`. */
  name: string;
  kubeConfig: KubeConfig;
  /** Collection path to watch, e.g. /api/v1/pods or /api/v1/namespaces/ns/secrets. */
  watchPath: string;
  /** The generated list call for the same collection, with these selectors applied. */
  list(opts: ListOptions): Promise<KubeList<T>>;
  fieldSelector?: string;
  labelSelector?: string;
  /** Store key; default metadata.uid (a re-created object is a different object). */
  keyOf?(obj: T): string;
  /** timeoutSeconds asked of the server for each watch (default 300). */
  watchTimeoutSeconds?: number;
  /** Silence allowed on a watch beyond watchTimeoutSeconds before the watchdog restarts it (default 30 s). */
  watchdogGraceMs?: number;
  /**
   * Retry delays after failures: jittered exponential from initialMs to maxMs
   * (default 500 ms → 4 s, so changes reach the disk within 5 s of the API
   * server coming back; the delay is drawn from [¼, 1) of the step so thousands
   * of nodes do not retry in lockstep).
   */
  backoff?: { initialMs?: number; maxMs?: number };
  logger?: Logger;
  /** Time, timers (backoff, watchdog, sync wait) and jitter; default the system's. */
  clock?: Clock;
}

/**
 * What every watch-backed informer (pods, node, CSIDrivers, claims, secrets,
 * configMaps, trust bundles) takes and hands its reflectors: the API, the log,
 * the watch tuning and the clock.
 */
export interface InformerOptions {
  kubeConfig: KubeConfig;
  logger?: Logger;
  watchTimeoutSeconds?: number;
  watchdogGraceMs?: number;
  backoff?: { initialMs?: number; maxMs?: number };
  /** Time, timers and jitter for the reflectors (default the system's). */
  clock?: Clock;
}

/** The InformerOptions of `o` (an informer's options carry more), to spread into ReflectorOptions. */
export function informerTuning(o: InformerOptions): InformerOptions {
  return {
    kubeConfig: o.kubeConfig,
    logger: o.logger,
    watchTimeoutSeconds: o.watchTimeoutSeconds,
    watchdogGraceMs: o.watchdogGraceMs,
    backoff: o.backoff,
    clock: o.clock,
  };
}

/** How long a watch must have lived (or delivered events) for a clean close to not count as a failure. */
const HEALTHY_WATCH_MS = 1000;

interface WatchOutcome {
  reason: RestartReason | 'stopped';
  events: number;
  err?: unknown;
}

export class Reflector<T extends KubeObject> {
  private readonly opts: ReflectorOptions<T>;
  private readonly store: Store<T>;
  private readonly eventListeners = new Set<(e: ReflectorEvent<T>) => void>();
  private readonly changeListeners = new Set<() => void>();
  private readonly watcher: Watch;
  private readonly clock: Clock;
  private rv = '';
  private synced = false;
  private running: Promise<void> | undefined;
  private stopCtl = new AbortController();
  private abortWatch: (() => void) | undefined;
  private failures = 0;
  private lastSync: Date | undefined;
  private lastEvent: Date | undefined;
  private restarts = 0;
  private readonly restartsBy: Record<RestartReason, number> = {
    closed: 0,
    expired: 0,
    error: 0,
    watchdog: 0,
    timeout: 0,
  };
  private error: ReflectorError | undefined;

  constructor(opts: ReflectorOptions<T>) {
    this.opts = opts;
    this.store = new Store(opts.keyOf);
    this.watcher = new Watch(opts.kubeConfig);
    this.clock = opts.clock ?? systemClock();
  }

  /** True once a full list has succeeded (and stays true). */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Time of the last successful list. */
  get lastSyncTime(): Date | undefined {
    return this.lastSync;
  }

  /** Time of the last watch event of any kind (bookmarks included). */
  get lastEventTime(): Date | undefined {
    return this.lastEvent;
  }

  /** Watches started again after the first one, for any reason. */
  get watchRestarts(): number {
    return this.restarts;
  }

  get watchRestartsByReason(): Readonly<Record<RestartReason, number>> {
    return this.restartsBy;
  }

  /** The last list/watch failure, cleared by the next successful list or watch event. */
  get lastError(): ReflectorError | undefined {
    return this.error;
  }

  get resourceVersion(): string {
    return this.rv;
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  list(): T[] {
    return this.store.list();
  }

  onEvent(listener: (e: ReflectorEvent<T>) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  /** Called after each applied watch event, each relist that changed anything, and each change of lastError. */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Starts the list/watch loop; resolves after the first list attempt, successful or not (see hasSynced). */
  start(): Promise<void> {
    if (this.running) return Promise.resolve();
    this.stopCtl = new AbortController();
    let firstAttempt: () => void = () => {};
    const attempted = new Promise<void>((ok) => {
      firstAttempt = ok;
    });
    this.running = this.loop(firstAttempt).finally(firstAttempt);
    return attempted;
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    this.abortWatch?.();
    await this.running;
    this.running = undefined;
  }

  /** Resolves true once synced, false if `timeoutMs` passes or the reflector stops unsynced. */
  waitForSync(timeoutMs: number): Promise<boolean> {
    if (this.synced) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (v: boolean) => {
        timer.cancel();
        off();
        this.stopCtl.signal.removeEventListener('abort', onStop);
        resolve(v);
      };
      const onStop = () => done(this.synced);
      const timer = this.clock.after(timeoutMs, () => done(false));
      const off = this.onSynced(() => done(true));
      this.stopCtl.signal.addEventListener('abort', onStop);
    });
  }

  private readonly syncedListeners = new Set<() => void>();
  private onSynced(fn: () => void): () => void {
    this.syncedListeners.add(fn);
    return () => this.syncedListeners.delete(fn);
  }

  private get stopped(): boolean {
    return this.stopCtl.signal.aborted;
  }

  private server(): string {
    return this.opts.kubeConfig.getCurrentCluster()?.server ?? '(no cluster)';
  }

  private async loop(firstAttempt: () => void): Promise<void> {
    let needList = true;
    let watched = false;
    while (!this.stopped) {
      if (needList) {
        try {
          await this.relist();
          needList = false;
          this.failures = 0;
        } catch (err) {
          this.fail(classifyError(`list ${this.opts.name}`, this.server(), err));
          firstAttempt();
          await this.backoff();
          continue;
        }
        firstAttempt();
      }
      if (this.stopped) break;
      if (watched) this.restarts++;
      watched = true;
      const started = this.clock.now();
      const outcome = await this.watchOnce();
      if (outcome.reason === 'stopped') break;
      this.restartsBy[outcome.reason]++;
      const healthy = outcome.events > 0 || this.clock.now() - started >= HEALTHY_WATCH_MS;
      switch (outcome.reason) {
        case 'expired':
          this.opts.logger?.info({ resource: this.opts.name }, 'watch resourceVersion expired, relisting');
          needList = true;
          break;
        case 'closed':
        case 'timeout':
          // A watch ending at its deadline is normal: carry on from the last resourceVersion.
          if (healthy) this.failures = 0;
          else await this.backoff();
          break;
        case 'watchdog':
          this.opts.logger?.warn({ resource: this.opts.name }, 'watch silent past its lifetime, restarting');
          break;
        case 'error':
          this.fail(classifyError(`watch ${this.opts.name}`, this.server(), outcome.err));
          if (this.error?.reason === 'Expired') needList = true;
          else await this.backoff();
          break;
      }
    }
    this.abortWatch?.();
  }

  private fail(e: ReflectorError): void {
    this.error = e;
    this.opts.logger?.warn({ resource: this.opts.name, reason: e.reason, code: e.code }, e.message);
    this.emitChange();
  }

  /** Clears lastError; returns whether there was one (so the caller announces the change). */
  private clearError(): boolean {
    const had = this.error !== undefined;
    this.error = undefined;
    return had;
  }

  private async backoff(): Promise<void> {
    const initial = this.opts.backoff?.initialMs ?? 500;
    const max = this.opts.backoff?.maxMs ?? 4_000;
    const base = Math.min(max, initial * 2 ** Math.min(this.failures, 30));
    this.failures++;
    // Jitter in [0.25, 1) × base so many agents do not retry in lockstep.
    const delay = base * (0.25 + (this.clock.random() * 3) / 4);
    await new Promise<void>((resolve) => {
      const t = this.clock.after(delay, done);
      const signal = this.stopCtl.signal;
      function done() {
        t.cancel();
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }

  private async relist(): Promise<void> {
    const list = await this.opts.list({
      fieldSelector: this.opts.fieldSelector,
      labelSelector: this.opts.labelSelector,
    });
    const events = this.store.replace(list.items);
    this.rv = list.metadata?.resourceVersion ?? '';
    this.lastSync = new Date(this.clock.now());
    const hadError = this.clearError();
    const first = !this.synced;
    this.synced = true;
    for (const e of events) this.emitEvent(e);
    if (events.length > 0 || first || hadError) this.emitChange();
    if (first) for (const fn of [...this.syncedListeners]) fn();
  }

  private watchOnce(): Promise<WatchOutcome> {
    const lifetimeMs = (this.opts.watchTimeoutSeconds ?? 300) * 1000 + (this.opts.watchdogGraceMs ?? 30_000);
    return new Promise<WatchOutcome>((resolve) => {
      let events = 0;
      let settled = false;
      let expired = false;
      let watchError: unknown;
      let controller: AbortController | undefined;
      const finish = (o: WatchOutcome) => {
        if (settled) return;
        settled = true;
        watchdog.cancel();
        this.abortWatch = undefined;
        controller?.abort();
        resolve(o);
      };
      const arm = (): Timer => this.clock.after(lifetimeMs, () => finish({ reason: 'watchdog', events }));
      let watchdog = arm();
      const kick = () => {
        watchdog.cancel();
        watchdog = arm();
      };
      this.abortWatch = () => finish({ reason: 'stopped', events });
      if (this.stopped) return finish({ reason: 'stopped', events });
      const params: Record<string, string | number | boolean> = {
        resourceVersion: this.rv,
        allowWatchBookmarks: true,
        timeoutSeconds: this.opts.watchTimeoutSeconds ?? 300,
      };
      if (this.opts.fieldSelector) params.fieldSelector = this.opts.fieldSelector;
      if (this.opts.labelSelector) params.labelSelector = this.opts.labelSelector;
      const onEvent = (type: string, obj: unknown) => {
        if (settled) return;
        events++;
        this.lastEvent = new Date(this.clock.now());
        kick();
        if (type === 'ERROR') {
          const code = fieldOf(obj, 'code');
          if (code === 410) expired = true;
          else watchError = { code: typeof code === 'number' ? code : undefined, body: obj };
          // The server ends the stream after an ERROR; stop reading now.
          finish(expired ? { reason: 'expired', events } : { reason: 'error', events, err: watchError });
          return;
        }
        this.failures = 0;
        if (this.clearError() && type === 'BOOKMARK') this.emitChange();
        // Cast: a watch event's object is of the watched kind (the API server's contract; client-node
        // does not check it either); ERROR, the one event carrying a Status, was handled above.
        this.apply(type, obj as T);
      };
      const onDone = (err: unknown) => {
        if (settled) return;
        if (!err) return finish({ reason: 'closed', events });
        if (fieldOf(err, 'name') === 'TimeoutError') return finish({ reason: 'timeout', events });
        if (fieldOf(err, 'statusCode') === 410) return finish({ reason: 'expired', events });
        finish({ reason: 'error', events, err });
      };
      this.watcher
        .watch(this.opts.watchPath, params, onEvent, onDone)
        .then((c) => {
          controller = c;
          // The watchdog or stop() may have given up on this attempt while headers were pending.
          if (settled) c.abort();
        })
        .catch((err) => onDone(err ?? new Error('watch failed')));
    });
  }

  private apply(type: string, obj: T): void {
    const rv = obj?.metadata?.resourceVersion;
    if (rv) this.rv = rv;
    if (type === 'BOOKMARK') return;
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return;
    const events = this.store.apply(type, obj);
    if (events.length === 0) return;
    for (const e of events) this.emitEvent(e);
    this.emitChange();
  }

  private emitEvent(e: ReflectorEvent<T>): void {
    for (const l of [...this.eventListeners]) {
      try {
        l(e);
      } catch (err) {
        this.opts.logger?.warn({ resource: this.opts.name, err }, 'reflector event listener threw');
      }
    }
  }

  private emitChange(): void {
    for (const l of [...this.changeListeners]) {
      try {
        l();
      } catch (err) {
        this.opts.logger?.warn({ resource: this.opts.name, err }, 'reflector change listener threw');
      }
    }
  }
}

/**
 * An informer whose lifecycle is its reflector's (the API pod source, node
 * info, the CSIDriver informer): start, stop, synced and change notices.
 */
export class ReflectorInformer<T extends KubeObject> {
  /** The reflector, for metrics (lastSyncTime, watchRestarts, lastError). */
  readonly reflector: Reflector<T>;

  constructor(reflector: Reflector<T>) {
    this.reflector = reflector;
  }

  start(): Promise<void> {
    return this.reflector.start();
  }

  stop(): Promise<void> {
    return this.reflector.stop();
  }

  hasSynced(): boolean {
    return this.reflector.hasSynced();
  }

  onChange(listener: () => void): () => void {
    return this.reflector.onChange(listener);
  }
}
