// One listener for /metrics, /healthz, /readyz and /status. Four fixed GET
// routes do not need a router.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface HttpHandlers {
  registry: Registry;
  alive(): boolean;
  ready(): { ready: boolean; reasons: string[] };
  status(): unknown;
}

export function createHttpServer(h: HttpHandlers): Server {
  return createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(code, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed\n');
    try {
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
      return send(500, `${(err as Error).message}\n`);
    }
  });
}

/** Parses HOST:PORT (IPv6 as [::1]:PORT); throws a message fit for a usage error. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new Error(`invalid listen address "${value}": want HOST:PORT, e.g. 127.0.0.1:10280`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}
