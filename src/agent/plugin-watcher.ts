// kubelet's plugin manager (pkg/kubelet/pluginmanager): watches
// <root>/plugins_registry and its subdirectories for unix sockets, asks each
// new one what it is (pluginregistration GetInfo), hands it to the handler of
// its type (only CSIPlugin here), and tells the plugin the outcome
// (NotifyRegistrationStatus). A removed socket deregisters; a socket replaced
// (new inode or timestamp) is deregistered and registered again.
//
// It scans every `periodMs` instead of using inotify: the same reconciler
// shape as kubelet's (desired sockets vs registered ones, once a second),
// and it cannot miss an event.
import { lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.ts';
import {
  loadRegistrationProto,
  registrationCallTimeoutMs,
  registrationDialTimeoutMs,
  unary,
  unixClient,
  waitReady,
} from '../plugins/csi/grpc.ts';
import type { PluginHandler } from '../plugins/csi/registration.ts';

export interface PluginWatcherOptions {
  dir: string;
  handlers: Record<string, PluginHandler>;
  logger: Logger;
  periodMs?: number;
  dialTimeoutMs?: number;
}

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
  readonly #registration = loadRegistrationProto();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #scanning: Promise<void> | undefined;

  constructor(o: PluginWatcherOptions) {
    this.#o = { periodMs: 1000, dialTimeoutMs: registrationDialTimeoutMs, ...o };
  }

  async start(): Promise<void> {
    // kubelet creates the directory (0750) so registrars can put their sockets there.
    await mkdir(this.#o.dir, { recursive: true, mode: 0o750 });
    const loop = () => {
      this.#timer = setTimeout(async () => {
        this.#scanning = this.scanOnce();
        await this.#scanning;
        if (!this.#stopped) loop();
      }, this.#o.periodMs);
    };
    this.#scanning = this.scanOnce();
    await this.#scanning;
    loop();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#scanning;
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
    await this.#walk(this.#o.dir, found);
    const work: Promise<void>[] = [];
    for (const [socket, s] of this.#seen) {
      if (this.#busy.has(socket)) continue;
      const stamp = found.get(socket);
      if (stamp === s.stamp && (s.retryAt === undefined || Date.now() < s.retryAt)) continue;
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
      void this.#register(socket, stamp).finally(() => this.#busy.delete(socket));
    }
  }

  async #walk(dir: string, found: Map<string, string>): Promise<void> {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return;
    }
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
      if (st.isDirectory()) await this.#walk(path, found);
      else if (st.isSocket()) found.set(path, `${st.ino}:${st.mtimeMs}`);
    }
  }

  async #register(socket: string, stamp: string): Promise<void> {
    const log = this.#o.logger.child({ component: 'plugin-watcher', socket });
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
        log.warn({ err: (err as Error).message }, 'NotifyRegistrationStatus failed');
      }
    };
    try {
      try {
        await waitReady(client, this.#o.dialTimeoutMs);
      } catch (err) {
        throw new Error(`failed to dial socket ${socket}: ${(err as Error).message}`);
      }
      let info: { type: string; name: string; endpoint: string; supported_versions: string[] };
      try {
        info = await unary(client, 'GetInfo', {}, registrationCallTimeoutMs);
      } catch (err) {
        throw new Error(
          `failed to get plugin info using RPC GetInfo at socket ${socket}: ${(err as Error).message}`,
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
        const msg = `plugin validation failed with err: ${(err as Error).message}`;
        await notify(false, msg);
        throw new Error(msg);
      }
      try {
        await handler.registerPlugin(info.name, endpoint, info.supported_versions, socket);
      } catch (err) {
        const msg = `plugin registration failed with err: ${(err as Error).message}`;
        await notify(false, msg);
        throw new Error(msg);
      }
      seen.registered = { type: info.type, name: info.name };
      await notify(true, '');
      log.info({ type: info.type, name: info.name, endpoint }, 'plugin registered');
      this.#failures.delete(socket);
    } catch (err) {
      seen.error = (err as Error).message;
      seen.failures = (this.#failures.get(socket) ?? 0) + 1;
      this.#failures.delete(socket);
      // 0.5 s doubling to about 2 min, as kubelet's operation executor backs off.
      seen.retryAt = Date.now() + Math.min(500 * 2 ** (seen.failures - 1), 122_000);
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
      this.#o.logger.warn({ socket, err: (err as Error).message }, 'plugin deregistration failed');
    }
  }
}
