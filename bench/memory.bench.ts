// P4: resident memory (VmRSS) of podvol idle in standalone mode, idle in
// cluster mode, with N pods × 4 volumes (configMap, secret, emptyDir,
// downwardAPI) in cluster mode, and after all of them were torn down. Baseline
// in the same run: a bare Node process listening on HTTP, and one that has
// also loaded @kubernetes/client-node. To tell retention from garbage, the V8
// heap used is read again after a forced full collection (through the inspector,
// opened by SIGUSR1 only once the figure without it was read, so a podvol of any
// commit can be measured), at idle and after the teardown.
// Run: node bench/memory.bench.ts [--pods=1000] [--settle-seconds=5] [--smoke]
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiPod, createPodObjects, deleteAllPods, startCluster } from './cluster.ts';
import {
  bareNode,
  ensureMountNamespace,
  figure,
  freePort,
  goal,
  header,
  type Podvol,
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

async function settled(p: Podvol): Promise<number> {
  await sleep(SETTLE_MS);
  return p.memory().rss;
}

/**
 * V8's used heap (MiB) from podvol's own /metrics: live JavaScript objects. An
 * RSS that stays high while this comes back down is memory the allocator did
 * not return, not objects podvol keeps.
 */
async function heapUsed(p: Podvol): Promise<{ used: number; total: number; external: number }> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const mib = (name: string) => {
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) / 2 ** 20 : Number.NaN;
  };
  return {
    used: mib('nodejs_heap_size_used_bytes'),
    total: mib('nodejs_heap_size_total_bytes'),
    external: mib('nodejs_external_memory_bytes'),
  };
}

/**
 * A full collection in podvol, forced from outside: SIGUSR1 opens its inspector
 * on the --inspect-port it was started with (again: harmless), and
 * HeapProfiler.collectGarbage collects everything unreachable. The heap used
 * after it is what podvol keeps alive.
 */
async function forcedCollection(p: Podvol, port: number): Promise<void> {
  p.proc.kill('SIGUSR1');
  let target = '';
  await until(
    'inspector listening',
    async () => {
      try {
        const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
          webSocketDebuggerUrl: string;
        }[];
        target = list[0]?.webSocketDebuggerUrl ?? '';
      } catch {
        // not listening yet
      }
      return target !== '';
    },
    50,
    20_000,
  );
  const ws = new WebSocket(target);
  try {
    await new Promise<void>((resolve, reject) => {
      ws.onerror = () => reject(new Error(`inspector ${target}: connection failed`));
      ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
      ws.onmessage = (e) => {
        const m = JSON.parse(String(e.data)) as { id?: number; error?: { message: string } };
        if (m.id !== 1) return;
        if (m.error) reject(new Error(`HeapProfiler.collectGarbage: ${m.error.message}`));
        else resolve();
      };
    });
  } finally {
    ws.close();
  }
}

const tmp = tempRoot('p4');
const { api, kubeconfig } = await startCluster(tmp.dir);
try {
  header('P4 resident memory', { pods: PODS, volumes: PODS * 4, settleSeconds: SETTLE_MS / 1000 });
  const bare = (await bareNode('', SETTLE_MS)).rss;
  const bareClient = (await bareNode("require('@kubernetes/client-node');", SETTLE_MS)).rss;

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

  for (let i = 0; i < OBJECTS; i++) createPodObjects(api, i);
  const root = join(tmp.dir, 'cluster');
  const inspectPort = await freePort();
  const p = await startPodvol({
    rootDir: root,
    kubeconfig,
    nodeArgs: [`--inspect-port=127.0.0.1:${inspectPort}`],
  });
  let idleCluster: number;
  let loaded: number;
  let after: number;
  let afterForced: number;
  let peak: number;
  const none = { used: 0, total: 0, external: 0 };
  const heap = { idle: none, idleForced: none, loaded: none, after: none, afterForced: none };
  try {
    await p.until200('/readyz', 20);
    idleCluster = await settled(p);
    heap.idle = await heapUsed(p);
    await forcedCollection(p, inspectPort);
    heap.idleForced = await heapUsed(p);
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
    heap.loaded = await heapUsed(p);
    await deleteAllPods(api, p, PODS * 4);
    await until(
      'pod directories removed',
      () => readdirSync(join(root, 'pods')).length === 0,
      100,
      1_800_000,
    );
    after = await settled(p);
    heap.after = await heapUsed(p);
    peak = p.memory().hwm;
    await forcedCollection(p, inspectPort);
    afterForced = await settled(p);
    heap.afterForced = await heapUsed(p);
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
  figure('podvol after teardown and a forced collection', afterForced, 'MiB', {
    name: 'idle cluster',
    value: idleCluster,
  });
  figure('podvol peak (VmHWM)', peak, 'MiB');
  for (const [when, h] of [
    ['idle', heap.idle],
    [`${PODS} pods`, heap.loaded],
    ['after teardown', heap.after],
    ['idle, collected', heap.idleForced],
    ['after teardown, collected', heap.afterForced],
  ] as const) {
    figure(`V8 heap used, ${when}`, h.used, 'MiB');
    console.log(
      `${''.padEnd(52)}${h.total.toFixed(1).padStart(8)} MiB committed, ${h.external.toFixed(1)} MiB external`,
    );
  }
  figure('V8 heap used after teardown ÷ idle', heap.after.used, 'MiB', {
    name: 'idle heap',
    value: heap.idle.used,
  });
  // Retention: live objects after the pods went, against live objects at idle (both collected).
  figure('V8 heap used after teardown ÷ idle, collected', heap.afterForced.used, 'MiB', {
    name: 'idle heap collected',
    value: heap.idleForced.used,
  });
  goal('P4 idle standalone', idleStandalone, 80, ' MiB');
  goal(`P4 ${PODS} pods (cluster)`, loaded, 150, ' MiB');
  goal('P4 after teardown ÷ idle (cluster)', after / idleCluster, 1.25, 'x');
} finally {
  await api.close();
  tmp.cleanup();
}
