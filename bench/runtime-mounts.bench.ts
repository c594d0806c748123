// Benchmark of the runtime socket (run as root: it mounts):
//   node bench/runtime-mounts.bench.ts [requests]
// Starts a real `podvol run` in a private mount namespace with one static pod
// (emptyDir, downwardAPI, a subPath), then times GET .../mounts for its ready
// container: p50/p99 over keep-alive connections and over a new connection per
// request (each one passes the SO_PEERCRED check). The baseline, measured in
// the same run with the same client, is a bare unix-socket HTTP server in this
// process that answers a fixed JSON document. Also prints the cost of one
// peer-credential lookup.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, createServer, request } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPeerCred } from '../src/agent/runtime/peercred.ts';

const N = Number(process.argv[2] ?? 2000);
const repo = join(import.meta.dirname, '..');

function get(
  socketPath: string,
  path: string,
  agent: Agent | false,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function time(socket: string, path: string, keepAlive: boolean): Promise<{ p50: number; p99: number }> {
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
  for (let i = 0; i < 100; i++) await get(socket, path, agent); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const r = await get(socket, path, agent);
    ms.push(performance.now() - t0);
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body}`);
  }
  if (agent) agent.destroy();
  ms.sort((a, b) => a - b);
  return { p50: ms[Math.floor(N * 0.5)], p99: ms[Math.floor(N * 0.99)] };
}

const fmt = (x: { p50: number; p99: number }) => `p50 ${x.p50.toFixed(3)} ms, p99 ${x.p99.toFixed(3)} ms`;

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root: podvol mounts volumes');
  const dir = await mkdtemp(join(tmpdir(), 'podvol-bench-'));
  const manifests = join(dir, 'manifests');
  await mkdir(manifests);
  await writeFile(
    join(manifests, 'bench.json'),
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bench', namespace: 'default' },
      spec: {
        containers: [
          {
            name: 'app',
            image: 'x',
            volumeMounts: [
              { name: 'data', mountPath: '/data' },
              { name: 'data', mountPath: '/logs', subPath: 'logs' },
              { name: 'info', mountPath: '/info' },
            ],
          },
        ],
        volumes: [
          { name: 'data', emptyDir: {} },
          {
            name: 'info',
            downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] },
          },
        ],
      },
    }),
  );
  const socket = join(dir, 'run', 'podvol.sock');
  const child = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '--',
      process.execPath,
      join(repo, 'bin/podvol.js'),
      'run',
      '--root-dir',
      join(dir, 'root'),
      '--pod-manifest-path',
      manifests,
      '--listen',
      '127.0.0.1:0',
      '--runtime-socket',
      socket,
      '--node-name',
      'bench',
      '--log-level',
      'warn',
    ],
    { stdio: 'inherit' },
  );
  try {
    let uid = '';
    for (let i = 0; i < 600 && !uid; i++) {
      await new Promise((r) => setTimeout(r, 100));
      try {
        const pods = JSON.parse((await get(socket, '/v1/pods', false)).body).pods as {
          uid: string;
          ready: boolean;
        }[];
        if (pods[0]?.ready) uid = pods[0].uid;
      } catch {}
    }
    if (!uid) throw new Error('podvol did not get the pod ready in 60 s');
    const path = `/v1/pods/${uid}/containers/app/mounts`;
    const body = (await get(socket, path, false)).body;

    // Baseline: the same client against a bare server answering the same document.
    const baseSocket = join(dir, 'baseline.sock');
    const base = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    await new Promise<void>((r) => base.listen(baseSocket, r));

    const podvolKA = await time(socket, path, true);
    const baseKA = await time(baseSocket, '/', true);
    const podvolNew = await time(socket, path, false);
    const baseNew = await time(baseSocket, '/', false);
    base.close();

    // One SO_PEERCRED lookup on an accepted connection.
    const peerCred = loadPeerCred();
    const credSocket = join(dir, 'cred.sock');
    const perCall = await new Promise<number>((resolve) => {
      const srv = createNetServer((s) => {
        const rounds = 100_000;
        const t0 = performance.now();
        for (let i = 0; i < rounds; i++) peerCred(s);
        resolve(((performance.now() - t0) / rounds) * 1e6);
        s.destroy();
        srv.close();
      });
      srv.listen(credSocket, () => connect(credSocket));
    });

    console.log(`runtime socket GET .../mounts (${N} requests, ready pod, 3 mounts incl. a subPath)`);
    console.log(
      `  keep-alive:        podvol ${fmt(podvolKA)}   baseline ${fmt(baseKA)}   p99 ratio ${(podvolKA.p99 / baseKA.p99).toFixed(2)}`,
    );
    console.log(
      `  new connection:    podvol ${fmt(podvolNew)}   baseline ${fmt(baseNew)}   p99 ratio ${(podvolNew.p99 / baseNew.p99).toFixed(2)}`,
    );
    console.log(`  SO_PEERCRED lookup: ${perCall.toFixed(0)} ns per connection`);
    console.log(`  budget: p99 <= 5 ms -> ${Math.max(podvolKA.p99, podvolNew.p99) <= 5 ? 'met' : 'NOT met'}`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    // The daemon leaves its mounts behind on purpose; they lived in its own namespace, gone with it.
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
