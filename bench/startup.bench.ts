// start → /healthz 200 in standalone mode (an empty manifest directory, a
// fresh root), against a bare Node HTTP server started and polled the same
// way in the same run; and, for what loading costs, a bare Node process that
// imports @kubernetes/client-node before it listens.
// Run: node bench/startup.bench.ts [--rounds=7] [--smoke]   (env BENCH_ROUNDS)
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  bareNode,
  ensureMountNamespace,
  figure,
  goal,
  header,
  median,
  size,
  startPodvol,
  tempRoot,
} from './lib.ts';

ensureMountNamespace();
const ROUNDS = size('rounds', 7, 1);

const tmp = tempRoot('start');
try {
  header('start → /healthz (standalone)', { rounds: ROUNDS });
  const manifests = join(tmp.dir, 'manifests');
  mkdirSync(manifests);
  const podvol: number[] = [];
  const bare: number[] = [];
  const withClient: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    bare.push((await bareNode('', 500)).ms);
    withClient.push((await bareNode("require('@kubernetes/client-node');", 500)).ms);
    const p = await startPodvol({ rootDir: join(tmp.dir, `root${i}`), manifests });
    try {
      podvol.push((await p.until200('/healthz', 5)) - p.spawnedAt);
    } finally {
      await p.stop();
    }
  }
  const b = median(bare);
  figure('bare node http server: spawn → 200 (median)', b, 'ms');
  figure('bare node + require client-node: spawn → 200', median(withClient), 'ms', {
    name: 'bare',
    value: b,
  });
  figure('podvol run: spawn → /healthz 200 (median)', median(podvol), 'ms', { name: 'bare', value: b });
  console.log(`podvol rounds: ${podvol.map((x) => x.toFixed(0)).join(' ')} ms`);
  goal('start → /healthz', median(podvol) / 1000, 0.5, ' s');
} finally {
  tmp.cleanup();
}
