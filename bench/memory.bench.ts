// P4: resident memory (VmRSS) of podvol idle in standalone mode, idle in
// cluster mode, with N pods × 4 volumes (configMap, secret, emptyDir,
// downwardAPI) in cluster mode, and after all of them were torn down. Baseline
// in the same run: a bare Node process listening on HTTP, and one that has
// also loaded @kubernetes/client-node.
// Run: node bench/memory.bench.ts [--pods=1000] [--settle-seconds=5] [--smoke]
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiPod, createConfigMap, createSecret, deleteAllPods, startCluster } from './cluster.ts';
import {
  ensureMountNamespace,
  figure,
  freePort,
  goal,
  header,
  type Podvol,
  procMemory,
  repoRoot,
  size,
  startPodvol,
  tempRoot,
  until,
  waitLines,
} from './lib.ts';

ensureMountNamespace();
const PODS = size('pods', 1000, 5);
const SETTLE_MS = size('settle-seconds', 5, 1) * 1000;
const OBJECTS = Math.min(PODS, 50);

async function bareRss(preload: string): Promise<number> {
  const port = await freePort();
  const code = `${preload}require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1');`;
  const proc = spawn(process.execPath, ['-e', code], { stdio: 'ignore', cwd: repoRoot });
  try {
    await until('bare node listening', async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/`)).status === 200;
      } catch {
        return false;
      }
    });
    await sleep(SETTLE_MS);
    return procMemory(proc.pid ?? 0).rss;
  } finally {
    proc.kill('SIGKILL');
  }
}

async function settled(p: Podvol): Promise<number> {
  await sleep(SETTLE_MS);
  return p.memory().rss;
}

const tmp = tempRoot('p4');
const { api, kubeconfig } = await startCluster(tmp.dir);
try {
  header('P4 resident memory', { pods: PODS, volumes: PODS * 4, settleSeconds: SETTLE_MS / 1000 });
  const bare = await bareRss('');
  const bareClient = await bareRss("require('@kubernetes/client-node');");

  const manifests = join(tmp.dir, 'manifests');
  mkdirSync(manifests);
  const standalone = await startPodvol({ rootDir: join(tmp.dir, 'standalone'), manifests });
  let idleStandalone: number;
  try {
    await standalone.until200('/readyz', 20);
    idleStandalone = await settled(standalone);
  } finally {
    await standalone.stop();
  }

  for (let i = 0; i < OBJECTS; i++) {
    createConfigMap(api, `cfg-${i}`);
    createSecret(api, `sec-${i}`);
  }
  const root = join(tmp.dir, 'cluster');
  const p = await startPodvol({ rootDir: root, kubeconfig });
  let idleCluster: number;
  let loaded: number;
  let after: number;
  let peak: number;
  try {
    await p.until200('/readyz', 20);
    idleCluster = await settled(p);
    const ready = waitLines(p, 'MountVolume.SetUp succeeded', PODS * 4, 1_800_000, (l) => !l.remount);
    for (let i = 0; i < PODS; i++) {
      api.store.create(
        'pods',
        apiPod(`mem-${i}`, [
          { name: 'cfg', configMap: { name: `cfg-${i % OBJECTS}`, defaultMode: 0o644 } },
          { name: 'sec', secret: { secretName: `sec-${i % OBJECTS}`, defaultMode: 0o420 } },
          { name: 'scratch', emptyDir: {} },
          {
            name: 'podinfo',
            downwardAPI: {
              defaultMode: 0o644,
              items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }],
            },
          },
        ]),
      );
    }
    await ready;
    loaded = await settled(p);
    await deleteAllPods(api, p, PODS * 4);
    await until(
      'pod directories removed',
      () => readdirSync(join(root, 'pods')).length === 0,
      100,
      1_800_000,
    );
    after = await settled(p);
    peak = p.memory().hwm;
  } finally {
    await p.stop();
  }

  figure('bare node http server', bare, 'MiB');
  figure('bare node + @kubernetes/client-node', bareClient, 'MiB', { name: 'bare', value: bare });
  figure('podvol idle, standalone', idleStandalone, 'MiB', { name: 'bare', value: bare });
  figure('podvol idle, cluster mode', idleCluster, 'MiB', { name: 'bare', value: bare });
  figure(`podvol with ${PODS} pods, ${PODS * 4} volumes (cluster)`, loaded, 'MiB', {
    name: 'bare',
    value: bare,
  });
  figure('podvol after tearing them all down', after, 'MiB', { name: 'idle cluster', value: idleCluster });
  figure('podvol peak (VmHWM)', peak, 'MiB');
  goal('P4 idle standalone', idleStandalone, 80, ' MiB');
  goal(`P4 ${PODS} pods (cluster)`, loaded, 150, ' MiB');
  goal('P4 after teardown ÷ idle (cluster)', after / idleCluster, 1.2, 'x');
} finally {
  await api.close();
  tmp.cleanup();
}
