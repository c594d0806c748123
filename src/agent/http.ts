// One listener for /metrics, /healthz, /readyz and /status. Four fixed GET
// routes do not need a router. Served as plain HTTP, or as HTTPS behind the
// access guard (see access/serving.ts for which).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  createServer as createHttpsServer,
  type Server as HttpsServer,
  type ServerOptions,
} from 'node:https';
import { Socket as NetSocket, type Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { errorMessage, fieldOf } from '../errno.ts';
import { type Logger, silentLogger } from '../logger.ts';
import type { Guard } from './access/guard.ts';
import { isLoopback } from './access/serving.ts';
import { createConnectionBudget, tcpPeer } from './connection-budget.ts';
import { loadSocketQueues } from './socket-queues.ts';

export interface HttpHandlers {
  registry: Registry;
  alive(): boolean;
  ready(): { ready: boolean; reasons: string[] };
  status(): unknown;
}

/**
 * Limits that keep the listener from starving the daemon, and a flood from
 * starving /healthz: at most `max` connections (`perPeer` from one address),
 * the least recently used idle one evicted for a new one (see
 * connection-budget.ts), so a probe always gets in; a connection is accepted
 * only once it has sent something (TCP_DEFER_ACCEPT); idle, slow and
 * never-handshaking clients are closed within seconds. The daemon scales
 * `max` and `perPeer` to its descriptor limit (connectionCaps).
 */
export const httpLimits = {
  max: 128,
  perPeer: 32,
  /** No request in flight this long (including a client that never sent a byte): closed. */
  idleMs: 10_000,
  /** A TLS client must finish its handshake within this (Node's default is 120 s). */
  handshakeTimeoutMs: 5_000,
  /** A client must send its complete headers within this, or the connection is closed. */
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  /** How often Node checks the two timeouts above. */
  connectionsCheckingIntervalMs: 1_000,
  maxRequestsPerSocket: 100,
  /** A socket with no traffic at all this long is closed, even mid-request (a client that stopped reading). */
  socketTimeoutMs: 10_000,
};

export function createHttpServer(
  h: HttpHandlers,
  secure?: { tls: ServerOptions; guard: Guard },
  limits = httpLimits,
  logger: Logger = silentLogger(),
): Server | HttpsServer {
  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    const [path = '/'] = (req.url ?? '/').split('?');
    const send = (code: number, body: string, type = 'text/plain; charset=utf-8', headers = {}) => {
      res.writeHead(code, { 'content-type': type, 'cache-control': 'no-store', ...headers });
      res.end(body);
    };
    try {
      if (secure) {
        const d = await secure.guard.check(req, path);
        if (!d.allowed) return send(d.status, d.body, undefined, d.headers);
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed\n');
      switch (path) {
        case '/metrics':
          return send(200, await h.registry.metrics(), h.registry.contentType);
        case '/healthz':
          return h.alive() ? send(200, 'ok\n') : send(503, 'reconciler loop stalled\n');
        case '/readyz': {
          const r = h.ready();
          return r.ready ? send(200, 'ok\n') : send(503, `not ready: ${r.reasons.join('; ')}\n`);
        }
        case '/status':
          return send(200, `${JSON.stringify(h.status(), null, 2)}\n`, 'application/json');
        default:
          return send(404, 'not found\n');
      }
    } catch (err) {
      return send(500, `${errorMessage(err)}\n`);
    }
  };
  const opts = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
  };
  const server = secure
    ? createHttpsServer({ ...secure.tls, ...opts, handshakeTimeout: limits.handshakeTimeoutMs }, handler)
    : createServer(opts, handler);
  server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
  server.setTimeout(limits.socketTimeoutMs);
  const log = logger.child({ component: 'http' });
  const queues = loadSocketQueues();
  // Connections that have sent nothing stay in the kernel until they do
  // (socket-queues.ts): a silent flood costs no descriptor, and a probe is
  // accepted with its request.
  let deferred = false;
  server.once('listening', () => {
    deferred = queues?.deferAccept(server) ?? false;
    if (!deferred)
      log.warn(
        { addon: queues ? 'built' : 'not built' },
        'cannot defer accepting silent connections (TCP_DEFER_ACCEPT, native/sockq): under a flood of them a probe can be closed before its request arrives',
      );
  });
  const budget = createConnectionBudget(limits, log, {
    ...(queues ? { unread: queues.unread } : {}),
    refuseSilent: () => deferred,
  });
  // For TLS this is the raw TCP socket, before the handshake: a client that
  // never sends a ClientHello counts (and is evicted) like any other.
  // Every local user connects from a loopback address: a share for "that
  // peer" would only shrink the room a local probe has under a local flood.
  // Node's own 'connection' listeners (the HTTP parser's set-up; for HTTPS the
  // TLS socket over the raw one, an OpenSSL session) run only for a connection
  // the budget admits: a refused one costs an accept and a close, which is
  // what a reconnecting flood makes podvol pay for every one of its connections.
  const setUp = server.listeners('connection');
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const peer = tcpPeer(socket);
    if (!budget.admit(socket, peer, !isLoopback(peer))) return;
    for (const listener of setUp) Reflect.apply(listener, server, [socket]);
  });
  // Requests arrive on the TLS socket, the budget holds the raw one beneath it:
  // Node links them only internally (TLSSocket._parent), read as peercred reads _handle.
  server.on('secureConnection', (tls: Socket) => {
    const raw = fieldOf(tls, '_parent');
    if (raw instanceof NetSocket) budget.alias(tls, raw);
  });
  // Before the handler, so a request that ends synchronously is still counted.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) =>
    res.once('close', budget.busy(req.socket)),
  );
  server.once('close', () => budget.close());
  return server;
}

/** Parses HOST:PORT (IPv6 as [::1]:PORT); throws a message fit for a usage error. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new Error(`invalid listen address "${value}": want HOST:PORT, e.g. 127.0.0.1:10280`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}
