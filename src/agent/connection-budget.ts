// How many client connections a listener holds, and which one goes when a new
// one arrives at the limit. Shared by the HTTP(S) port and the runtime socket.
//
// The policy: a new connection always gets in while any held connection is
// idle (no request in flight), because an idle one is evicted to make room,
// first among the new connection's own peer once that peer holds its share,
// else among all. Which idle one: the least recently used of those that have
// not yet spoken (SPOKE_BYTES, counting what Node read and what still waits
// unread in the kernel's queue), then of those that spoke but have nothing
// waiting (a stalled request, a keep-alive client between requests), and
// only last one whose bytes are waiting to be read: a request about to be
// served. A flood of idle, slow or half-open connections therefore only ever
// evicts itself, and a probe is safe from its first moment: on TCP the
// listener defers accepting a connection until its first bytes arrive
// (TCP_DEFER_ACCEPT), so a probe is accepted with its request, and Node
// reads a connection only on a later turn of the event loop than the one
// that accepted it, so the budget asks the kernel what waits unread
// (FIONREAD) instead of trusting what Node has read (socket-queues.ts).
// A connection is refused (destroyed at once, never half-closed) only when
// every connection it could replace is serving a request, or, where the
// listener asks for it (refuseSilent), when it arrives at the cap or its
// peer's share without having spoken. A slowloris client that trickles
// header bytes has not spoken here (its request never arrives), so it is
// evicted in its turn. The cap is never exceeded, and the caps keep client
// sockets well below the descriptor limit (connectionCaps), so the mount
// work always has descriptors.
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { Logger } from '../logger.ts';
import { loadSocketQueues, type SocketQueues } from './socket-queues.ts';

/**
 * Bytes after which an idle connection has spoken: more than a slowloris at
 * one byte a second trickles before the header or handshake timeout (5 s; the
 * runtime socket's headers 10 s) ends it, less than the shortest request
 * (`GET / HTTP/1.0` and an empty line: 18 bytes; a probe's with its Host
 * header is twice that) or any TLS ClientHello (about 200 bytes and up).
 */
export const SPOKE_BYTES = 16;

/**
 * The listen(2) backlog of every listener (the kernel caps it at somaxconn,
 * 4096 by default). Node's 511 filled under a reconnecting flood: a probe's
 * SYN was dropped and retried after a second, and a unix socket connect
 * failed at once (EAGAIN).
 */
export const LISTEN_BACKLOG = 4096;

export interface BudgetLimits {
  /** Connections held at once by the listener. */
  max: number;
  /** Connections one peer (a TCP address, a unix socket caller's UID) holds at once. */
  perPeer: number;
  /** A connection with no request in flight for this long is closed (also one that never sent a byte). */
  idleMs: number;
}

interface Held {
  socket: Socket;
  peer: string;
  /** Requests in flight (HTTP/1.1 pipelining can make it more than one). */
  busy: number;
}

export interface ConnectionBudget {
  /**
   * Takes `socket` in for `peer`, evicting an idle connection if need be; false: it was destroyed.
   * `ownShare` false: the peer is not held to `perPeer` (it stands for many callers, as loopback does).
   */
  admit(socket: Socket, peer: string, ownShare?: boolean): boolean;
  /** `alias` (e.g. the TLS socket over an admitted raw one) stands for the held `socket` from now on. */
  alias(alias: Socket, socket: Socket): void;
  /** Marks a request in flight on `socket` (or its alias); the returned function ends it. */
  busy(socket: Socket): () => void;
  /** Connections held now. */
  size(): number;
  /** Stops the idle sweep (the listener is closing). */
  close(): void;
}

export interface BudgetOptions {
  now?: () => number;
  /** Bytes waiting unread on a socket; default the native addon's answer. */
  unread?: SocketQueues['unread'];
  /**
   * Whether a newcomer that has not spoken is refused at once, at its peer's
   * share or at the listener's cap, instead of taking a held connection's
   * place. True at both while the listener defers accepting until a
   * connection speaks (TCP_DEFER_ACCEPT): such a connection sent a fragment
   * (a slowloris) or nothing for the whole deferral, never a probe's request.
   * The runtime socket says so at a share: a caller that already holds half
   * the socket is a flood. Either way a flood's connection then costs an
   * accept and a close (no HTTP parser, no TLS socket), not an eviction and
   * a set-up.
   */
  refuseSilent?: (at: 'share' | 'cap') => boolean;
}

export function createConnectionBudget(
  limits: BudgetLimits,
  logger: Logger,
  options: BudgetOptions = {},
): ConnectionBudget {
  const now = options.now ?? performance.now.bind(performance);
  // Without the addon only what Node has read counts (the listener warns).
  const unread = options.unread ?? loadSocketQueues()?.unread;
  // Maps iterate in insertion order: re-inserting a connection when it goes
  // idle keeps both maps ordered least recently used first, so the next victim
  // is the first idle entry (no scan over busy ones in the common case).
  const all = new Map<Socket, Held & { since: number }>();
  const byPeer = new Map<string, Map<Socket, Held>>();
  const aliases = new WeakMap<Socket, Socket>();
  const evicted = perPeerNotices(logger, 'idle connections closed to make room for new ones');
  const refused = perPeerNotices(
    logger,
    'connection refused: every connection it could replace is serving a request',
  );
  const refusedSilent = perPeerNotices(
    logger,
    'connection refused: it arrived at the cap or its peer’s share without a request',
  );
  const spoke = (s: Socket) => s.bytesRead + (unread ? unread(s) : 0) >= SPOKE_BYTES;

  const drop = (h: Held) => {
    all.delete(h.socket);
    const mine = byPeer.get(h.peer);
    mine?.delete(h.socket);
    if (mine?.size === 0) byPeer.delete(h.peer);
  };
  const touch = (h: Held & { since: number }) => {
    h.since = now();
    all.delete(h.socket);
    all.set(h.socket, h);
    const mine = byPeer.get(h.peer);
    mine?.delete(h.socket);
    mine?.set(h.socket, h);
  };
  // The idle connection to close, in three tiers, each least recently used
  // first: one that has not spoken (a flood's idle or slowloris connection; a
  // probe in its TLS handshake has sent its ClientHello); else one that spoke
  // and has nothing waiting; else one with bytes waiting unread (a request
  // accepted but not read by Node yet). One FIONREAD per connection looked
  // at; under a flood the first is the one.
  const victim = (held: Map<Socket, Held>) => {
    let stalled: Held | undefined;
    let arriving: Held | undefined;
    for (const h of held.values()) {
      if (h.busy > 0) continue;
      const waiting = unread ? unread(h.socket) : 0;
      if (h.socket.bytesRead + waiting < SPOKE_BYTES) return h;
      if (waiting === 0) stalled ??= h;
      else arriving ??= h;
    }
    return stalled ?? arriving;
  };
  const evict = (h: Held, forPeer: string) => {
    drop(h);
    h.socket.destroy();
    evicted(h.peer, { for: forPeer });
  };

  const sweep = setInterval(
    () => {
      const cutoff = now() - limits.idleMs;
      for (const h of all.values()) {
        if (h.since > cutoff) break;
        if (h.busy > 0) continue;
        drop(h);
        h.socket.destroy();
      }
    },
    Math.max(100, Math.min(1_000, limits.idleMs / 4)),
  );
  sweep.unref();

  return {
    admit(socket, peer, ownShare = true) {
      const mine = byPeer.get(peer);
      const atShare = ownShare && mine !== undefined && mine.size >= limits.perPeer;
      const atCap = all.size >= limits.max;
      const refuseSilent =
        (atShare && options.refuseSilent?.('share')) || (atCap && options.refuseSilent?.('cap'));
      if (refuseSilent && !spoke(socket)) {
        socket.destroy();
        refusedSilent(peer, {});
        return false;
      }
      if (atShare && mine) {
        const v = victim(mine);
        if (!v) return refuse(socket, peer);
        evict(v, peer);
      }
      if (all.size >= limits.max) {
        const v = victim(all);
        if (!v) return refuse(socket, peer);
        evict(v, peer);
      }
      const h = { socket, peer, busy: 0, since: now() };
      all.set(socket, h);
      const peerMap = byPeer.get(peer) ?? new Map<Socket, Held>();
      peerMap.set(socket, h);
      byPeer.set(peer, peerMap);
      socket.once('close', () => {
        if (all.get(socket) === h) drop(h);
      });
      return true;
    },
    alias(a, socket) {
      aliases.set(a, socket);
    },
    busy(socket) {
      const h = all.get(aliases.get(socket) ?? socket);
      if (!h) return () => {};
      h.busy++;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        h.busy--;
        if (h.busy === 0 && all.get(h.socket) === h) touch(h);
      };
    },
    size: () => all.size,
    close: () => clearInterval(sweep),
  };

  function refuse(socket: Socket, peer: string): false {
    socket.destroy();
    refused(peer, {});
    return false;
  }
}

/**
 * A warning at most once per peer per interval, with how many were not logged
 * since: a flood must not become a flood of log lines. Peers not seen for an
 * interval are forgotten, so the table stays as small as the active peers.
 */
export function perPeerNotices(
  logger: Logger,
  msg: string,
  intervalMs = 60_000,
  now: () => number = performance.now.bind(performance),
): (peer: string, fields: Record<string, unknown>) => void {
  const seen = new Map<string, { at: number; suppressed: number }>();
  return (peer, fields) => {
    const t = now();
    const s = seen.get(peer);
    if (s && t - s.at < intervalMs) {
      s.suppressed++;
      return;
    }
    if (seen.size > 1_000) for (const [p, v] of seen) if (t - v.at >= intervalMs) seen.delete(p);
    logger.warn({ peer, ...fields, ...(s ? { sinceLastLine: s.suppressed } : {}) }, msg);
    seen.set(peer, { at: t, suppressed: 0 });
  };
}

/** A TCP peer's key: its address (an IPv4-mapped IPv6 address as the IPv4 one). */
export function tcpPeer(socket: Socket): string {
  const a = socket.remoteAddress ?? 'unknown';
  return a.startsWith('::ffff:') ? a.slice(7) : a;
}

/** The soft limit on open files (Node raises it to the hard limit at start), or undefined. */
export function openFileLimit(limitsFile = '/proc/self/limits'): number | undefined {
  try {
    const line = readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    return Number.isFinite(soft) && soft > 0 ? soft : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The caps of the HTTP port and the runtime socket: their defaults, scaled
 * down so that together they hold at most 3/16 of the descriptor limit (the
 * rest is the mount work's: directory walks, mount(8), the CSI and API
 * connections). Per-peer shares are a quarter of the HTTP cap (remote peers)
 * and half of the socket's (root's runtime and one other caller).
 */
export function connectionCaps(fdLimit: number | undefined): {
  http: { max: number; perPeer: number };
  runtime: { max: number; perPeer: number };
} {
  const http = Math.max(8, Math.min(128, Math.floor((fdLimit ?? Infinity) / 16)));
  const runtime = Math.max(8, Math.min(256, Math.floor((fdLimit ?? Infinity) / 8)));
  return {
    http: { max: http, perPeer: Math.max(2, Math.floor(http / 4)) },
    runtime: { max: runtime, perPeer: Math.max(2, Math.floor(runtime / 2)) },
  };
}
