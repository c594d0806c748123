// One listener for /metrics, /healthz, /readyz and /status. Four fixed GET
// routes do not need a router. Served as plain HTTP, or as HTTPS behind the
// access guard (see access/serving.ts for which).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  createServer as createHttpsServer,
  type Server as HttpsServer,
  type ServerOptions,
} from 'node:https';
import type { Registry } from 'prom-client';
import { errorMessage } from '../errno.ts';
import type { Guard } from './access/guard.ts';

export interface HttpHandlers {
  registry: Registry;
  alive(): boolean;
  ready(): { ready: boolean; reasons: string[] };
  status(): unknown;
}

/**
 * Limits that keep the listener from starving the daemon: idle or slow clients
 * cannot hold file descriptors the mount work needs (a thousand idle TCP
 * connections used to exhaust them), and every connection beyond the cap is
 * closed at once.
 */
export const httpLimits = {
  maxConnections: 64,
  /** A client must send its complete headers within this, or the connection is closed. */
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  /** How often Node checks the two timeouts above. */
  connectionsCheckingIntervalMs: 1_000,
  maxRequestsPerSocket: 100,
  /** A socket with no traffic this long is closed (Node's header timeout ignores a client that sends nothing). */
  idleTimeoutMs: 10_000,
};

export function createHttpServer(
  h: HttpHandlers,
  secure?: { tls: ServerOptions; guard: Guard },
  limits = httpLimits,
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
    ? createHttpsServer({ ...secure.tls, ...opts }, handler)
    : createServer(opts, handler);
  server.maxConnections = limits.maxConnections;
  server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
  server.setTimeout(limits.idleTimeoutMs);
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
