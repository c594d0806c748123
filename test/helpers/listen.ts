// Servers of tests listen on 127.0.0.1 port 0 (never a fixed port: several
// test runs share the machine) and learn their port here.
import type { Server } from 'node:net';
import { Registry } from 'prom-client';
import { createHttpServer, type httpLimits } from '../../src/agent/http.ts';

/** Listens on an ephemeral port of 127.0.0.1; resolves with that port. */
export async function listenLocal(server: Server): Promise<number> {
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', fail);
      ok();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`not listening on TCP: ${address}`);
  return address.port;
}

/** podvol's HTTP server with nothing behind it but a live, ready daemon: for tests of its listener. */
export function healthOnlyServer(limits: typeof httpLimits): ReturnType<typeof createHttpServer> {
  return createHttpServer(
    {
      registry: new Registry(),
      alive: () => true,
      ready: () => ({ ready: true, reasons: [] }),
      status: () => ({}),
    },
    undefined,
    limits,
  );
}
