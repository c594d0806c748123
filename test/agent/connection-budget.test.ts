// The connection budget shared by the HTTP port and the runtime socket (issue
// 21, findings 1 and 2): which connection goes when a new one arrives at the
// cap, per-peer shares, refusals that really close, a probe accepted in one
// batch with a flood (its request still unread in the kernel's queue) kept,
// and log lines per peer per interval rather than one per connection.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  connectionCaps,
  createConnectionBudget,
  LISTEN_BACKLOG,
  openFileLimit,
  perPeerNotices,
} from '../../src/agent/connection-budget.ts';
import { httpLimits } from '../../src/agent/http.ts';
import { loadSocketQueues } from '../../src/agent/socket-queues.ts';
import { errorMessage } from '../../src/errno.ts';
import { silentLogger } from '../../src/logger.ts';
import { waitFor } from '../helpers/daemon.ts';
import { healthOnlyServer, listenLocal } from '../helpers/listen.ts';

const unread = loadSocketQueues()?.unread;

/**
 * A loopback server whose accepted sockets arrive in order; clients are tracked for clean-up.
 * `unreadData`: Node never reads the accepted sockets, so what a client sends stays in the
 * kernel's queue, as it is for every connection of one accept batch.
 */
async function harness(t: import('node:test').TestContext, { unreadData = false } = {}) {
  const accepted: Socket[] = [];
  const server: Server = createServer({ pauseOnConnect: unreadData }, (s) => {
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
    if (data && unreadData)
      await waitFor('data queued', () => (unread?.(s) ?? 0) >= data.length || undefined);
    else if (data) await waitFor('data read', () => s.bytesRead >= data.length || undefined);
    s.pause();
    // Not events.once: a client whose unread request is dropped gets a reset ('error') before 'close'.
    return { server: s, client: c, closed: new Promise<true>((r) => c.once('close', () => r(true))) };
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

const request = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';

test('the sockq addon is built and tells the bytes waiting unread in the kernel', async (t) => {
  assert.ok(unread, 'native/sockq/build/sockq.node loads (npm ci builds it)');
  const { open } = await harness(t, { unreadData: true });
  const spoke = await open(request);
  assert.equal(spoke.server.bytesRead, 0, 'Node has read nothing');
  assert.equal(unread(spoke.server), request.length);
  const silent = await open();
  assert.equal(unread(silent.server), 0);
  silent.server.destroy();
  assert.equal(unread(silent.server), 0, 'a closed socket has nothing waiting');
  assert.equal(loadSocketQueues(new URL('file:///nonexistent/sockq.node')), undefined);
});

test('one accept batch: a probe whose request waits unread outlives the cap of silent connections behind it', async (t) => {
  const { open } = await harness(t, { unreadData: true });
  const budget = createConnectionBudget(limits, silentLogger());
  t.after(() => budget.close());
  // As libuv hands them over: the probe first, then 20 silent ones, none read by Node yet.
  const probe = await open(request);
  const flood = [];
  for (let i = 0; i < 20; i++) flood.push(await open());
  for (const x of [probe, ...flood]) assert.equal(budget.admit(x.server, '127.0.0.1', false), true);
  assert.equal(budget.size(), limits.max, 'the cap is never exceeded, not even within a batch');
  assert.equal(probe.server.destroyed, false, 'the probe is kept');
  assert.deepEqual(
    flood.map((f) => f.server.destroyed),
    [...new Array(18).fill(true), false, false],
    'the silent ones went oldest first, the two newest stay',
  );
});

test('without the addon only what Node read counts: the same batch evicts the probe unread', async (t) => {
  const { open } = await harness(t, { unreadData: true });
  const budget = createConnectionBudget(limits, silentLogger(), { unread: () => 0 });
  t.after(() => budget.close());
  const probe = await open(request);
  budget.admit(probe.server, '127.0.0.1', false);
  for (let i = 0; i < 3; i++) budget.admit((await open()).server, '127.0.0.1', false);
  assert.equal(await probe.closed, true, 'the fallback this addon exists for');
});

test('where the listener defers accepting, a newcomer at the cap that has not spoken is refused; one that has evicts', async (t) => {
  const { open } = await harness(t, { unreadData: true });
  let deferring = true;
  const budget = createConnectionBudget({ ...limits, max: 2 }, silentLogger(), {
    refuseSilent: () => deferring,
  });
  t.after(() => budget.close());
  const held = [await open(), await open()];
  for (const h of held) budget.admit(h.server, '127.0.0.1', false);
  const fragment = await open('G');
  assert.equal(budget.admit(fragment.server, '127.0.0.1', false), false, 'a one-byte fragment is refused');
  assert.equal(await fragment.closed, true);
  assert.ok(
    held.every((h) => !h.server.destroyed),
    'and takes no held connection’s place',
  );
  const probe = await open(request);
  assert.equal(budget.admit(probe.server, '127.0.0.1', false), true, 'a request evicts');
  assert.equal(await held[0]?.closed, true, 'the oldest silent one');
  deferring = false;
  const silent = await open();
  assert.equal(
    budget.admit(silent.server, '127.0.0.1', false),
    true,
    'without the deferral, silent ones evict too',
  );
});

test('the runtime socket’s rule: a caller at its share is refused a silent newcomer, another caller is not', async (t) => {
  const { open } = await harness(t, { unreadData: true });
  const budget = createConnectionBudget({ max: 10, perPeer: 2, idleMs: 60_000 }, silentLogger(), {
    refuseSilent: (at) => at === 'share',
  });
  t.after(() => budget.close());
  for (let i = 0; i < 2; i++) budget.admit((await open()).server, 'uid 65534');
  assert.equal(budget.admit((await open()).server, 'uid 65534'), false, 'the flood at its share');
  assert.equal(budget.admit((await open(request)).server, 'uid 65534'), true, 'its request still gets in');
  assert.equal(budget.admit((await open()).server, 'uid 0'), true, 'root is not at its share');
});

test('among idle connections that spoke, one with nothing waiting goes before one whose bytes wait unread', async (t) => {
  const read = await harness(t);
  const queued = await harness(t, { unreadData: true });
  const budget = createConnectionBudget({ ...limits, max: 2 }, silentLogger());
  t.after(() => budget.close());
  const arriving = await queued.open(request);
  const stalled = await read.open('x'.repeat(200));
  budget.admit(arriving.server, 'a');
  budget.admit(stalled.server, 'b');
  budget.admit((await read.open()).server, 'c');
  assert.equal(await stalled.closed, true, 'the stalled one goes although it is newer');
  assert.equal(arriving.server.destroyed, false);
});

// A probe whose client is slow to write its request (descheduled on a busy
// machine between connect and write) while silent connections keep coming
// after it: accepted at once, it was the oldest that had not spoken once the
// cap of newer ones had arrived, and was closed before it said anything.
test('the HTTP listener accepts a connection only once it speaks: a probe slow to write outlives 200 silent ones after it', async (t) => {
  const limits = { ...httpLimits, max: 8, perPeer: 8 };
  const server = healthOnlyServer(limits);
  let accepted = 0;
  server.on('connection', () => accepted++);
  await new Promise<void>((ok) => server.listen({ port: 0, host: '127.0.0.1', backlog: LISTEN_BACKLOG }, ok));
  const clients: Socket[] = [];
  t.after(() => {
    for (const c of clients) c.destroy();
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  const dial = () => {
    const c = connect(address.port, '127.0.0.1');
    c.on('error', () => {});
    clients.push(c);
    return once(c, 'connect');
  };
  const probe = connect(address.port, '127.0.0.1');
  clients.push(probe);
  let answer = '';
  probe.setEncoding('utf8').on('data', (d: string) => (answer += d));
  const ended = new Promise<string>((r) => probe.once('close', () => r(answer.split('\r\n')[0] ?? '')));
  probe.on('error', (e: Error) => (answer ||= errorMessage(e)));
  await once(probe, 'connect');
  await Promise.all(Array.from({ length: 200 }, dial));
  await sleep(200);
  const silentAccepted = accepted;
  probe.write(request);
  assert.equal(await ended, 'HTTP/1.1 200 OK', 'the probe was answered');
  assert.equal(silentAccepted, 0, 'no connection that has sent nothing was handed to podvol');
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
