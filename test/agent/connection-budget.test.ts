// The connection budget shared by the HTTP port and the runtime socket (issue
// 21, findings 1 and 2): which connection goes when a new one arrives at the
// cap, per-peer shares, refusals that really close, and log lines per peer
// per interval rather than one per connection.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import {
  connectionCaps,
  createConnectionBudget,
  openFileLimit,
  perPeerNotices,
} from '../../src/agent/connection-budget.ts';
import { silentLogger } from '../../src/logger.ts';
import { waitFor } from '../helpers/daemon.ts';
import { listenLocal } from '../helpers/listen.ts';

/** A loopback server whose accepted sockets arrive in order; clients are tracked for clean-up. */
async function harness(t: import('node:test').TestContext) {
  const accepted: Socket[] = [];
  const server: Server = createServer((s) => {
    s.on('error', () => {});
    accepted.push(s);
  });
  const port = await listenLocal(server);
  const clients: Socket[] = [];
  t.after(() => {
    for (const c of clients) c.destroy();
    for (const s of accepted) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  /** Connects and resolves with the server's side of the connection and the client's. */
  const open = async (data?: string) => {
    const c = connect(port, '127.0.0.1');
    c.on('error', () => {});
    clients.push(c);
    const n = accepted.length;
    await once(c, 'connect');
    if (data) c.write(data);
    await waitFor('accepted', () => accepted.length > n || undefined);
    const s = accepted[n];
    assert.ok(s);
    if (data) await waitFor('data read', () => s.bytesRead >= data.length || undefined);
    s.pause();
    return { server: s, client: c, closed: once(c, 'close').then(() => true) };
  };
  return { open };
}

const limits = { max: 3, perPeer: 2, idleMs: 60_000 };

test('a new connection at the cap evicts the least recently used idle one, never a busy one', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget(limits, silentLogger());
  t.after(() => budget.close());
  const a = await open();
  const b = await open();
  const c = await open();
  for (const [x, peer] of [
    [a, 'p1'],
    [b, 'p2'],
    [c, 'p3'],
  ] as const)
    assert.equal(budget.admit(x.server, peer), true);
  budget.busy(a.server); // a request in flight on the oldest
  const d = await open();
  assert.equal(budget.admit(d.server, 'p4'), true, 'the newcomer gets in');
  assert.equal(await b.closed, true, 'the oldest idle one (b, not the busy a) was closed');
  assert.equal(a.server.destroyed, false);
  assert.equal(budget.size(), 3);
});

test('one peer at its share evicts its own oldest idle connection, not another peer’s', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget({ ...limits, max: 10 }, silentLogger());
  t.after(() => budget.close());
  const other = await open();
  budget.admit(other.server, 'root');
  const mine = [await open(), await open()];
  for (const m of mine) budget.admit(m.server, 'flood');
  const next = await open();
  assert.equal(budget.admit(next.server, 'flood'), true);
  assert.equal(await mine[0]?.closed, true, "the flood's oldest went");
  assert.equal(other.server.destroyed, false, "root's connection stays");
});

test('without a share (loopback) a peer may fill the whole budget', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget(limits, silentLogger());
  t.after(() => budget.close());
  const xs = [await open(), await open(), await open()];
  for (const x of xs) budget.admit(x.server, '127.0.0.1', false);
  assert.equal(budget.size(), 3);
  assert.ok(xs.every((x) => !x.server.destroyed));
});

test('an idle connection that has spoken (a ClientHello, a request) outlives older ones that have not', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget({ ...limits, max: 2 }, silentLogger());
  t.after(() => budget.close());
  const spoke = await open('x'.repeat(200));
  const silent = await open();
  budget.admit(spoke.server, 'a');
  budget.admit(silent.server, 'b');
  const next = await open();
  budget.admit(next.server, 'c');
  assert.equal(await silent.closed, true, 'the silent one goes although it is newer');
  assert.equal(spoke.server.destroyed, false);
});

test('when every connection is busy the newcomer is refused: destroyed, not half-closed', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget({ ...limits, max: 1 }, silentLogger());
  t.after(() => budget.close());
  const a = await open();
  budget.admit(a.server, 'a');
  const done = budget.busy(a.server);
  const b = await open();
  assert.equal(budget.admit(b.server, 'b'), false);
  assert.equal(await b.closed, true, 'the client sees its connection closed');
  done();
  const c = await open();
  assert.equal(budget.admit(c.server, 'c'), true, 'once the request ends, a is idle and can be replaced');
  assert.equal(await a.closed, true);
});

test('connections idle longer than idleMs are closed; one with a request in flight is not', async (t) => {
  const { open } = await harness(t);
  const budget = createConnectionBudget({ ...limits, idleMs: 200 }, silentLogger());
  t.after(() => budget.close());
  const idle = await open();
  const busy = await open();
  budget.admit(idle.server, 'a');
  budget.admit(busy.server, 'b');
  budget.busy(busy.server);
  assert.equal(await idle.closed, true);
  assert.equal(busy.server.destroyed, false);
});

test('refusals and evictions are logged once per peer per interval, with the count since', () => {
  const lines: Record<string, unknown>[] = [];
  const logger = { ...silentLogger(), warn: (o: Record<string, unknown>) => lines.push(o) };
  let now = 0;
  const note = perPeerNotices(logger, 'refused', 1_000, () => now);
  for (let i = 0; i < 500; i++) note('uid 65534', {});
  note('uid 1000', {});
  assert.equal(lines.length, 2, 'one line per peer');
  now = 1_000;
  note('uid 65534', {});
  assert.deepEqual(lines.at(-1), { peer: 'uid 65534', sinceLastLine: 499 });
});

test('client connections get at most 3/16 of the descriptor limit, and the defaults above it', () => {
  assert.deepEqual(connectionCaps(1024), {
    http: { max: 64, perPeer: 16 },
    runtime: { max: 128, perPeer: 64 },
  });
  assert.deepEqual(connectionCaps(65536), {
    http: { max: 128, perPeer: 32 },
    runtime: { max: 256, perPeer: 128 },
  });
  assert.equal(connectionCaps(undefined).http.max, 128);
  const limit = openFileLimit();
  assert.ok(limit && limit > 0, `read this process's limit: ${limit}`);
});
