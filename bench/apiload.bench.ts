// The load podvol puts on the API server per pod lifecycle (create → volumes
// ready → run → delete → torn down) for a pod with a secret, a configMap and a
// service account token, counted by the test API server; and how it grows
// with pods per node (each pod with its own secret and configMap, the worst
// case for per-object watches). The idle daemon's request rate is printed
// first; node-level requests (node, CSIDrivers, the pods
// watch) are not counted per pod.
// Run: node bench/apiload.bench.ts [--pods=1,10,50] [--run-seconds=5] [--smoke]
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestRecord, TestApiServer } from '../test/apiserver/server.ts';
import {
  apiPod,
  createPodObjects,
  deleteAllPods,
  secretConfigMapTokenVolumes,
  startCluster,
} from './cluster.ts';
import {
  ensureMountNamespace,
  figure,
  header,
  size,
  sizes,
  startPodvol,
  tempRoot,
  until,
  waitLines,
} from './lib.ts';

ensureMountNamespace();
const COUNTS = sizes('pods', [1, 10, 50], [1, 2]);
const RUN_S = size('run-seconds', 5, 1);

/** Requests made for the node as a whole, pods or not: the node, CSIDrivers, the pods list+watch. */
const nodeLevel = (q: RequestRecord) =>
  q.resource === 'nodes' ||
  q.resource === 'csidrivers' ||
  (q.resource === 'pods' && (q.verb === 'list' || q.verb === 'watch'));
const key = (r: RequestRecord) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}`;
function tally(reqs: RequestRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of reqs) m.set(key(r), (m.get(key(r)) ?? 0) + 1);
  return m;
}

const tmp = tempRoot('apiload');
const { api, kubeconfig } = await startCluster(tmp.dir);
try {
  header('API server load per pod lifecycle', { runSeconds: RUN_S });
  const root = join(tmp.dir, 'root');
  const p = await startPodvol({ rootDir: root, kubeconfig });
  try {
    await p.until200('/readyz', 20);
    const startup = tally(api.hooks.requests);
    console.log(
      `start-up: ${api.hooks.requests.length} requests (${[...startup].map(([k, v]) => `${v} ${k}`).join(', ')}); open watches ${api.hooks.openWatches()}`,
    );

    const lifecycle = async (n: number, tag: string, hooks: TestApiServer['hooks']) => {
      for (let i = 0; i < n; i++) createPodObjects(api, `${tag}-${i}`);
      hooks.clearRequests();
      const t0 = performance.now();
      const ready = waitLines(p, 'MountVolume.SetUp succeeded', n * 3, 600_000, (l) => !l.remount);
      for (let i = 0; i < n; i++) {
        api.store.create('pods', apiPod(`api-${tag}-${i}`, secretConfigMapTokenVolumes(`${tag}-${i}`)));
      }
      await ready;
      let maxWatches = hooks.openWatches();
      const runEnd = performance.now() + RUN_S * 1000;
      while (performance.now() < runEnd) {
        maxWatches = Math.max(maxWatches, hooks.openWatches());
        await sleep(100);
      }
      await deleteAllPods(api, p, n * 3);
      await until('pod directories removed', () => readdirSync(join(root, 'pods')).length === 0, 50);
      await sleep(500);
      return {
        ms: performance.now() - t0,
        requests: [...hooks.requests],
        maxWatches,
        watchesAfter: hooks.openWatches(),
      };
    };

    const perPod: { n: number; requests: number; watches: number }[] = [];
    api.hooks.clearRequests();
    const idleStart = performance.now();
    await sleep(RUN_S * 1000 + 2000);
    const idlePerSecond = api.hooks.requests.length / ((performance.now() - idleStart) / 1000);
    const idleWatches = api.hooks.openWatches();
    console.log(
      `idle: ${idlePerSecond.toFixed(2)} requests/s, ${idleWatches} open watches (pods, nodes, csidrivers)`,
    );
    console.log(
      '\npods  requests for pod objects  per pod  extra watches (max)  per pod  after delete  breakdown (all pods)',
    );
    for (const n of COUNTS) {
      const r = await lifecycle(n, `n${n}`, api.hooks);
      // Node-level requests (the node, CSIDrivers, the pods watch re-opening) go on whether
      // there are pods or not (the idle rate above); the rest is what the pods cost.
      const podReqs = r.requests.filter((q) => !nodeLevel(q));
      const net = podReqs.length;
      const extra = r.maxWatches - idleWatches;
      const breakdown = [...tally(r.requests)]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${v} ${k}`)
        .join(', ');
      perPod.push({ n, requests: net / n, watches: extra / n });
      console.log(
        `${String(n).padStart(4)}  ${net.toFixed(0).padStart(8)}  ${(net / n).toFixed(1).padStart(7)}  ${String(extra).padStart(19)}  ${(extra / n).toFixed(1).padStart(7)}  ${String(r.watchesAfter - idleWatches).padStart(12)}  ${breakdown}`,
      );
    }
    console.log('');
    for (const r of perPod) {
      figure(`API requests per pod lifecycle, ${r.n} pods per node`, r.requests, 'req');
      figure(`open watches per pod while running, ${r.n} pods per node`, r.watches, 'watches');
    }
  } finally {
    await p.stop();
  }
} finally {
  await api.close();
  tmp.cleanup();
}
