// Finding 6: idle connections must not starve the daemon's listener or its
// file descriptors.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { httpLimits } from '../../src/agent/http.ts';
import { waitFor } from '../helpers/daemon.ts';
import { healthOnlyServer, listenLocal } from '../helpers/listen.ts';

test('200 idle connections: never more than the cap held, idle ones time out, /healthz answers during and after', async (t) => {
  const limits = {
    ...httpLimits,
    max: 8,
    perPeer: 8,
    headersTimeoutMs: 400,
    idleMs: 500,
    connectionsCheckingIntervalMs: 100,
  };
  const server = healthOnlyServer(limits);
  const port = await listenLocal(server);
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const sockets: Socket[] = [];
  t.after(() => {
    for (const s of sockets) s.destroy();
  });
  let accepted = 0;
  let serverClosed = 0;
  server.on('connection', (s) => {
    accepted++;
    s.on('close', () => serverClosed++);
  });
  const budgetHeld = () => accepted - serverClosed;
  const connections = () => new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
  for (let i = 0; i < 200; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    sockets.push(s);
  }
  await waitFor('every connection seen', async () => accepted >= 200 || undefined);
  assert.ok(budgetHeld() <= limits.max, 'never more than the cap held');
  // The newest connection gets in, evicting the oldest idle one: health answers under the flood.
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  // The idle ones never send a byte: closed by the idle timeout, so the listener is free again.
  await waitFor(
    'idle connections closed',
    async () => (serverClosed === accepted && (await connections()) === 0) || undefined,
  );
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(res.status, 200);
});
