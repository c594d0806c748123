// kubelet's plugin manager (pkg/kubelet/pluginmanager): watches
// <root>/plugins_registry and its subdirectories for unix sockets, asks each
// new one what it is (pluginregistration GetInfo), hands it to the handler of
// its type (only CSIPlugin here), and tells the plugin the outcome
// (NotifyRegistrationStatus). A removed socket deregisters; a socket replaced
// (new inode or timestamp) is deregistered and registered again.
//
// Like kubelet's fsnotify watcher, every directory of the tree is watched
// (inotify through fs.watch; a new subdirectory is watched from the scan that
// finds it), and any event triggers a scan soon after, so a registrar's
// socket is picked up within milliseconds. The scan is the one reconciler
// (sockets on disk vs registered ones), so a missed or overflowed event costs
// nothing but time: a slow periodic scan (`periodMs`) is the safety net, and
// a failed socket's retry wakes the loop when its backoff is over.
import { type FSWatcher, watch } from 'node:fs';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Clock, systemClock, type Timer } from '../clock.ts';
import { errorMessage } from '../errno.ts';
import type { Logger } from '../logger.ts';
import { registrationCallTimeoutMs, registrationDialTimeoutMs } from '../plugins/csi/grpc-status.ts';
import type { PluginHandler } from '../plugins/csi/registration.ts';
import { rerunWhileAsked } from './rerun.ts';

export interface PluginWatcherOptions {
  dir: string;
  handlers: Record<string, PluginHandler>;
  logger: Logger;
  /** The safety-net rescan (default 10 s); events trigger a scan at once. */
  periodMs?: number;
  dialTimeoutMs?: number;
  /** The scans' timer and the backoffs' time (default the system's). */
  clock?: Clock;
}

/** Events arriving together (a bind, then a chmod) make one scan. */
const eventDebounceMs = 20;

interface Seen {
  /** inode + mtime: a changed value is a new socket at the same path. */
  stamp: string;
  /** Set once registered (name and type of the plugin). */
  registered?: { type: string; name: string };
  /** Why the last attempt failed (shown in /status). */
  error?: string;
  /** A failed socket is tried again from then on (kubelet's exponential backoff). */
  retryAt?: number;
  failures?: number;
}

export interface PluginStatus {
  socket: string;
  type?: string;
  name?: string;
  registered: boolean;
  error?: string;
}

export class PluginWatcher {
  readonly #o: Required<PluginWatcherOptions>;
  readonly #seen = new Map<string, Seen>();
  readonly #busy = new Set<string>();
  /** Failures in a row of a socket being retried, for its backoff. */
  readonly #failures = new Map<string, number>();
  /** Loaded (with gRPC) when the first socket appears: a node without CSI never loads it. */
  #registration: ReturnType<typeof import('../plugins/csi/grpc.ts').loadRegistrationProto> | undefined;
  readonly #watchers = new Map<string, FSWatcher>();
  #timer: Timer | undefined;
  #timerAt = 0;
  #stopped = false;
  /** A socket that appears while a scan runs gets a scan of its own after it. */
  readonly #scans = rerunWhileAsked(
    async () => {
      try {
        await this.scanOnce();
      } catch (err) {
        // scanOnce handles expected failures itself; this keeps the loop alive on a bug.
        this.#o.logger.error({ err: errorMessage(err) }, 'plugin watcher scan failed');
      }
    },
    { stopped: () => this.#stopped, idle: () => this.#schedule() },
  );

  constructor(o: PluginWatcherOptions) {
    this.#o = { periodMs: 10_000, dialTimeoutMs: registrationDialTimeoutMs, clock: systemClock(), ...o };
  }

  async start(): Promise<void> {
    // kubelet creates the directory (0750) so registrars can put their sockets there.
    await mkdir(this.#o.dir, { recursive: true, mode: 0o750 });
    await this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    for (const w of this.#watchers.values()) w.close();
    this.#watchers.clear();
    await this.#scans.running();
  }

  /** Scans now, or right after the running scan when one is running. */
  #run(): Promise<void> {
    return this.#scans.run();
  }

  /** The next scan: after `delay`, or the safety-net period, or when a failed socket's backoff ends. */
  #schedule(delay?: number): void {
    if (this.#stopped) return;
    let wait = delay ?? this.#o.periodMs;
    for (const s of this.#seen.values()) {
      if (s.retryAt !== undefined) wait = Math.min(wait, Math.max(0, s.retryAt - this.#o.clock.now()));
    }
    const at = this.#o.clock.now() + wait;
    if (this.#timer && this.#timerAt <= at) return;
    this.#timer?.cancel();
    this.#timerAt = at;
    this.#timer = this.#o.clock.after(
      wait,
      () => {
        this.#timer = undefined;
        void this.#run();
      },
      { unref: true },
    );
  }

  /** Watches exactly the directories of the last walk. */
  #syncWatchers(dirs: Set<string>): void {
    for (const [dir, w] of this.#watchers) {
      if (!dirs.has(dir)) {
        w.close();
        this.#watchers.delete(dir);
      }
    }
    if (this.#stopped) return;
    let added = false;
    for (const dir of dirs) {
      if (this.#watchers.has(dir)) continue;
      added = true;
      try {
        const w = watch(dir, { persistent: false }, () => this.#schedule(eventDebounceMs));
        // A watched directory removed or unreadable: the next scan decides what to watch.
        w.on('error', () => {
          w.close();
          if (this.#watchers.get(dir) === w) this.#watchers.delete(dir);
          this.#schedule(eventDebounceMs);
        });
        this.#watchers.set(dir, w);
      } catch (err) {
        this.#o.logger.debug(
          { dir, err: errorMessage(err) },
          'cannot watch plugin directory; the periodic scan covers it',
        );
      }
    }
    // A socket created in a new directory before its watch was set up: one more look.
    if (added) this.#schedule(eventDebounceMs);
  }

  status(): PluginStatus[] {
    return [...this.#seen].map(([socket, s]) => ({
      socket,
      type: s.registered?.type,
      name: s.registered?.name,
      registered: s.registered !== undefined,
      error: s.error,
    }));
  }

  /** One pass: register new or replaced sockets, deregister removed ones. */
  async scanOnce(): Promise<void> {
    const found = new Map<string, string>();
    const dirs = new Set<string>();
    await this.#walk(this.#o.dir, found, dirs);
    this.#syncWatchers(dirs);
    const work: Promise<void>[] = [];
    for (const [socket, s] of this.#seen) {
      if (this.#busy.has(socket)) continue;
      const stamp = found.get(socket);
      if (stamp === s.stamp && (s.retryAt === undefined || this.#o.clock.now() < s.retryAt)) continue;
      // Gone or replaced: deregister what it registered.
      this.#seen.delete(socket);
      if (s.registered) work.push(this.#deregister(socket, s.registered));
      if (stamp === s.stamp) this.#failures.set(socket, s.failures ?? 0);
    }
    await Promise.all(work);
    for (const [socket, stamp] of found) {
      if (this.#seen.has(socket) || this.#busy.has(socket)) continue;
      this.#busy.add(socket);
      // Each socket registers on its own: one hanging plugin does not hold up the others.
      void this.#register(socket, stamp).finally(() => {
        this.#busy.delete(socket);
        // A failure's backoff decides when this socket is tried again.
        this.#schedule();
      });
    }
  }

  async #walk(dir: string, found: Map<string, string>, dirs: Set<string>): Promise<void> {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return;
    }
    dirs.add(dir);
    for (const name of names) {
      // kubelet ignores dotfiles (and so editors' and atomic writers' temporaries).
      if (name.startsWith('.')) continue;
      const path = join(dir, name);
      let st: Awaited<ReturnType<typeof lstat>>;
      try {
        st = await lstat(path);
      } catch {
        continue;
      }
      if (st.isDirectory()) await this.#walk(path, found, dirs);
      else if (st.isSocket()) found.set(path, `${st.ino}:${st.mtimeMs}`);
    }
  }

  async #register(socket: string, stamp: string): Promise<void> {
    const log = this.#o.logger.child({ component: 'plugin-watcher', socket });
    const { loadRegistrationProto, unary, unixClient, waitReady } = await import('../plugins/csi/grpc.ts');
    this.#registration ??= loadRegistrationProto();
    const client = unixClient(this.#registration.Registration, socket);
    const seen: Seen = { stamp };
    const notify = async (ok: boolean, error: string) => {
      try {
        await unary(
          client,
          'NotifyRegistrationStatus',
          { plugin_registered: ok, error },
          registrationCallTimeoutMs,
        );
      } catch (err) {
        log.warn({ err: errorMessage(err) }, 'NotifyRegistrationStatus failed');
      }
    };
    try {
      try {
        await waitReady(client, this.#o.dialTimeoutMs);
      } catch (err) {
        throw new Error(`failed to dial socket ${socket}: ${errorMessage(err)}`);
      }
      let info: { type: string; name: string; endpoint: string; supported_versions: string[] };
      try {
        info = await unary(client, 'GetInfo', {}, registrationCallTimeoutMs);
      } catch (err) {
        throw new Error(
          `failed to get plugin info using RPC GetInfo at socket ${socket}: ${errorMessage(err)}`,
        );
      }
      const handler = this.#o.handlers[info.type];
      if (!handler) {
        const msg = `no handler registered for plugin type: ${info.type} at socket ${socket}`;
        await notify(false, msg);
        throw new Error(msg);
      }
      const endpoint = info.endpoint || socket;
      try {
        handler.validatePlugin(info.name, endpoint, info.supported_versions);
      } catch (err) {
        const msg = `plugin validation failed with err: ${errorMessage(err)}`;
        await notify(false, msg);
        throw new Error(msg);
      }
      try {
        await handler.registerPlugin(info.name, endpoint, info.supported_versions, socket);
      } catch (err) {
        const msg = `plugin registration failed with err: ${errorMessage(err)}`;
        await notify(false, msg);
        throw new Error(msg);
      }
      seen.registered = { type: info.type, name: info.name };
      await notify(true, '');
      log.info({ type: info.type, name: info.name, endpoint }, 'plugin registered');
      this.#failures.delete(socket);
    } catch (err) {
      seen.error = errorMessage(err);
      seen.failures = (this.#failures.get(socket) ?? 0) + 1;
      this.#failures.delete(socket);
      // 0.5 s doubling to about 2 min, as kubelet's operation executor backs off.
      seen.retryAt = this.#o.clock.now() + Math.min(500 * 2 ** (seen.failures - 1), 122_000);
      log.warn({ err: seen.error, failures: seen.failures }, 'plugin registration failed');
    } finally {
      client.close();
      if (!this.#stopped) this.#seen.set(socket, seen);
    }
  }

  async #deregister(socket: string, r: { type: string; name: string }): Promise<void> {
    try {
      await this.#o.handlers[r.type]?.deRegisterPlugin(r.name, socket);
    } catch (err) {
      this.#o.logger.warn({ socket, err: errorMessage(err) }, 'plugin deregistration failed');
    }
  }
}
