// Chaos: connection floods (issue 21, findings 1 and 2). An unprivileged local
// user (uid 65534, and for the runtime socket a member of
// --runtime-socket-group) holds 1,100 connections open to each listener:
// idle ones that never send a byte (for TLS: never a ClientHello), and a
// slowloris variant that sends one byte of a request (or of a ClientHello)
// every few seconds and never finishes it. Whatever podvol closes, the flood
// opens again. Meanwhile a legitimate client probes the listener's health with
// a new connection each time (as kubelet's probes do): /healthz on the HTTP
// and HTTPS port, GET /v1/pods on the runtime socket. podvol runs with 1,024
// file descriptors (a container's usual limit; the flood used to exhaust
// them). Asserted, the contract to the letter: every probe answered
// (100 %), p99 ≤ 1 s, on each listener under each flood. What makes it hold
// (connection-budget.ts): the HTTP port accepts a connection only once it has
// sent something (TCP_DEFER_ACCEPT), so a probe arrives with its request and
// the idle flood waits in the kernel; a connection that arrives at the cap
// (the runtime socket: at its caller's share) without having spoken is
// refused before Node sets it up, so a slowloris flood costs an accept and a
// close per connection; and the connection evicted for a probe is one that
// has not spoken, judged by what the kernel holds unread as well as what Node
// read. Before, a probe slow to write its request (on a loaded machine) could
// be evicted unread: about 1 probe in 60, in 1 run of 3.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type PodvolProcess, runtimeSocketOf, startPodvol, waitFor } from '../helpers/daemon.ts';
import { percentile } from '../helpers/figures.ts';
import { mountTest } from '../helpers/mountns.ts';
import { createTestCA } from '../helpers/pki.ts';
import { staticPod } from '../helpers/pods.ts';
import { chaosSetup, figure, size } from './lib.ts';

const CONNECTIONS = 1_100;
const PROBE_FOR_MS = size(6_000, 60_000);
/** The slowloris flood's pace: one byte per connection this often. */
const SLOW_BYTE_MS = size(2_000, 5_000);
const PROBE_TIMEOUT_MS = 5_000;
const NOBODY = 65534;

type Target = { port: number } | { path: string };
type Mode = 'idle' | 'slow-http' | 'slow-tls';

// The flood, run as its own process (its descriptors are not the test's) under
// uid/gid 65534: it keeps CONNECTIONS connections open, reopening each one
// podvol closes, and reports how many it holds.
const floodScript = `
const net = require('node:net');
const { target, count, mode, slowMs } = JSON.parse(process.env.FLOOD);
const prefix = mode === 'slow-http'
  ? Buffer.from('GET /healthz HTTP/1.1\\r\\nHost: podvol\\r\\nX-Slow: ')
  : Buffer.from([0x16, 3, 1, 2, 0, 1, 0, 1, 0xfc, 3, 3, ...new Array(64).fill(7)]);
let open = 0;
let opened = 0;
const one = () => {
  const s = net.connect(target);
  let timer;
  let sent = 0;
  let up = false;
  const byte = () => { s.write(prefix.subarray(sent % prefix.length, (sent % prefix.length) + 1)); sent++; };
  s.on('connect', () => {
    up = true; open++; opened++;
    if (mode !== 'idle') { byte(); timer = setInterval(byte, slowMs); }
  });
  s.on('error', () => {});
  s.on('close', () => { if (up) open--; clearInterval(timer); setTimeout(one, 20); });
};
for (let i = 0; i < count; i++) one();
setInterval(() => console.log(JSON.stringify({ open, opened })), 250);
`;

function startFlood(target: Target, mode: Mode) {
  const child: ChildProcess = spawn(
    'setpriv',
    [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, '-e', floodScript],
    {
      env: {
        ...process.env,
        FLOOD: JSON.stringify({ target, count: CONNECTIONS, mode, slowMs: SLOW_BYTE_MS }),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const last = { open: 0, opened: 0 };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    const line = chunk.trim().split('\n').pop();
    if (line) Object.assign(last, JSON.parse(line));
  });
  return {
    last,
    stop: () =>
      new Promise<void>((r) => {
        child.once('exit', () => r());
        child.kill('SIGKILL');
      }),
  };
}

/** One probe on a new connection; resolves with its latency, or a failure. */
function probe(
  kind: 'http' | 'https' | 'unix',
  where: { port?: number; path?: string; ca?: string },
): Promise<{ ok: boolean; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (ok: boolean) => resolve({ ok, ms: performance.now() - started });
    const opts = {
      agent: false as const,
      timeout: PROBE_TIMEOUT_MS,
      headers: { connection: 'close' },
      ...(kind === 'unix'
        ? { socketPath: where.path, path: '/v1/pods' }
        : { host: '127.0.0.1', port: where.port, path: '/healthz' }),
      ...(kind === 'https' ? { ca: where.ca } : {}),
    };
    const req = (kind === 'https' ? httpsRequest : httpRequest)(opts, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode === 200));
      res.on('error', () => done(false));
    });
    req.on('timeout', () => req.destroy(new Error('probe timed out')));
    req.on('error', () => done(false));
    req.end();
  });
}

const openFds = (pid: number | undefined) => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
};

mountTest('chaos: floods of idle and slow connections on every listener', async (t) => {
  const { base, root, manifests, state } = await chaosSetup(t);
  const ca = createTestCA();
  const caFile = join(base, 'client-ca.crt');
  await writeFile(caFile, ca.cert);
  // A flood that holds more descriptors than podvol has: the limit is a container's usual one.
  const wrap = ['prlimit', '--nofile=1024:1024', '--'];
  const plain = await startPodvol({
    rootDir: root,
    manifests,
    wrap,
    extra: ['--runtime-socket-group', String(NOBODY)],
  });
  state.daemon = plain;
  const secureRoot = join(base, 'secure-root');
  const secureManifests = join(base, 'secure-manifests');
  await mkdir(secureManifests);
  const secure = await startPodvol({
    rootDir: secureRoot,
    manifests: secureManifests,
    wrap,
    secure: true,
    extra: ['--client-ca-file', caFile, '--authorization-mode', 'AlwaysAllow', '--runtime-socket', ''],
  });
  t.after(() => secure.stop('SIGKILL'));
  let crashes = 0;
  for (const p of [plain, secure]) p.proc.once('exit', (_c, signal) => signal !== 'SIGKILL' && crashes++);
  // The flood's user must reach the socket's directory (podvol makes that one 0710 root:65534).
  const socket = runtimeSocketOf(root);
  for (let d = dirname(dirname(socket)); d !== '/'; d = dirname(d)) await chmod(d, 0o755).catch(() => {});
  const serverCa = await readFile(join(secureRoot, 'pki', 'podvol.crt'), 'utf8');
  const port = (p: PodvolProcess) => Number(new URL(p.url).port);

  const scenarios: {
    name: string;
    daemon: PodvolProcess;
    target: Target;
    mode: Mode;
    kind: 'http' | 'https' | 'unix';
  }[] = [
    { name: 'http idle', daemon: plain, target: { port: port(plain) }, mode: 'idle', kind: 'http' },
    { name: 'http slowloris', daemon: plain, target: { port: port(plain) }, mode: 'slow-http', kind: 'http' },
    { name: 'https idle', daemon: secure, target: { port: port(secure) }, mode: 'idle', kind: 'https' },
    {
      name: 'https slowloris',
      daemon: secure,
      target: { port: port(secure) },
      mode: 'slow-tls',
      kind: 'https',
    },
    { name: 'runtime socket idle', daemon: plain, target: { path: socket }, mode: 'idle', kind: 'unix' },
    {
      name: 'runtime socket slowloris',
      daemon: plain,
      target: { path: socket },
      mode: 'slow-http',
      kind: 'unix',
    },
  ];
  const failures: string[] = [];
  let podsUnderFlood = 0;
  for (const s of scenarios) {
    const flood = startFlood(s.target, s.mode);
    // Up to 10 s for the flood to be in place (the connections podvol keeps are what they are).
    await waitFor(
      'the flood to connect',
      async () => flood.last.opened >= CONNECTIONS || undefined,
      10_000,
    ).catch(() => {});
    const results: { ok: boolean; ms: number }[] = [];
    let peakFds = 0;
    const until = performance.now() + PROBE_FOR_MS;
    // The mount work must still have its descriptors: a pod added under the runtime socket's flood is set up.
    const podUid = `flood-${s.mode}`;
    if (s.kind === 'unix')
      await writeFile(
        join(manifests, `${podUid}.json`),
        JSON.stringify({
          ...staticPod(podUid, [{ name: 'scratch', emptyDir: {} }]),
          metadata: { name: podUid, uid: podUid },
        }),
      );
    while (performance.now() < until) {
      results.push(
        await probe(s.kind, {
          port: 'port' in s.target ? s.target.port : undefined,
          path: socket,
          ca: serverCa,
        }),
      );
      peakFds = Math.max(peakFds, openFds(s.daemon.proc.pid));
      await sleep(100);
    }
    if (s.kind === 'unix') {
      const mounted = await probeVolumes(socket, podUid);
      if (mounted) podsUnderFlood++;
    }
    const held = flood.last.open;
    await flood.stop();
    const ok = results.filter((r) => r.ok).length;
    const rate = (100 * ok) / results.length;
    const p99 = percentile(
      results.map((r) => r.ms),
      99,
    );
    figure(t, `${s.name}: probe success`, `${rate.toFixed(1)} % (${ok}/${results.length})`);
    figure(t, `${s.name}: probe p99`, `${p99.toFixed(0)} ms`);
    figure(t, `${s.name}: flood connections open at the end, podvol's peak fds`, `${held}, ${peakFds}`);
    if (ok < results.length || p99 > 1_000)
      failures.push(`${s.name}: ${rate.toFixed(1)} % (${ok}/${results.length}), p99 ${p99.toFixed(0)} ms`);
    // Let podvol close what the flood left before the next one.
    await sleep(500);
  }
  figure(t, 'pods set up under the runtime socket floods', `${podsUnderFlood}/2`);
  assert.deepEqual(failures, [], 'every probe answers, p99 within 1 s, under every flood');
  assert.equal(podsUnderFlood, 2, 'a pod added under the flood is set up');
  assert.equal(crashes, 0, 'podvol never died');
});

/** Whether the pod's volumes are ready (asked as root, waiting up to 30 s). */
function probeVolumes(socketPath: string, uid: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = httpRequest(
      { socketPath, path: `/v1/pods/${uid}/volumes?wait=30`, agent: false, timeout: 40_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve(res.statusCode === 200 && /"ready":true/.test(body)));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}
