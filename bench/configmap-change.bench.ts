// P3: a configMap changes in the API server → the new content is in the file
// on disk, for every pod that mounts it. The files are read every 2 ms.
// Baseline in the same run: a bare @kubernetes/client-node watch on the same
// object, in this process, over HTTPS: the floor for any agent.
// Run: node bench/configmap-change.bench.ts [--pods=10] [--changes=30] [--smoke]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { uidOf } from '../test/helpers/pods.ts';
import { apiPod, createConfigMap, deleteAllPods, startCluster } from './cluster.ts';
import {
  ensureMountNamespace,
  figure,
  goal,
  header,
  median,
  percentile,
  size,
  startPodvol,
  tempRoot,
  until,
  waitLines,
} from './lib.ts';

ensureMountNamespace();
const PODS = size('pods', 10, 2);
const CHANGES = size('changes', 30, 3);

const tmp = tempRoot('p3');
const { api, kubeconfig } = await startCluster(tmp.dir);
try {
  header('P3 configMap change → new content on disk', { pods: PODS, changes: CHANGES });
  createConfigMap(api, 'app-config', 'v0');
  const uids: string[] = [];
  for (let i = 0; i < PODS; i++) {
    const pod = api.store.create(
      'pods',
      apiPod(`cm-${i}`, [{ name: 'cfg', configMap: { name: 'app-config', defaultMode: 0o644 } }]),
    );
    uids.push(uidOf(pod));
  }
  const root = join(tmp.dir, 'root');
  const p = await startPodvol({ rootDir: root, kubeconfig });
  try {
    await waitLines(p, 'MountVolume.SetUp succeeded', PODS);
    const files = uids.map((uid) =>
      join(root, 'pods', uid, 'volumes', 'kubernetes.io~configmap', 'cfg', 'app.conf'),
    );
    const read = (f: string) => {
      try {
        return readFileSync(f, 'utf8');
      } catch {
        return '';
      }
    };
    const latencies: number[] = [];
    const watchLatencies: number[] = [];
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    let onWatch: (value: string, at: number) => void = () => {};
    const bare = await new Watch(kc).watch(
      '/api/v1/namespaces/default/configmaps',
      { fieldSelector: 'metadata.name=app-config' },
      (_type: string, obj: { data?: Record<string, string> }) =>
        onWatch(obj.data?.['app.conf'] ?? '', performance.now()),
      () => {},
    );
    for (let c = 1; c <= CHANGES; c++) {
      const value = `v${c}`;
      const pending = new Set(files);
      const seen = new Promise<number>((res) => {
        onWatch = (v, at) => v === value && res(at);
      });
      const cm = api.store.mustGet('configmaps', 'default', 'app-config');
      const t0 = performance.now();
      api.store.update('configmaps', { ...cm, data: { 'app.conf': value } });
      await until(
        `configMap ${value} on disk`,
        () => {
          for (const f of pending) {
            if (read(f) === value) {
              latencies.push(performance.now() - t0);
              pending.delete(f);
            }
          }
          return pending.size === 0;
        },
        2,
        60_000,
      );
      watchLatencies.push((await seen) - t0);
      await sleep(200);
    }
    bare.abort();
    figure('bare client-node watch sees the change, p50', median(watchLatencies), 'ms');
    figure('bare client-node watch sees the change, p99', percentile(watchLatencies, 99), 'ms');
    const bw = { name: 'bare watch', value: median(watchLatencies) };
    figure('configMap change → file content, p50', percentile(latencies, 50), 'ms', bw);
    figure('configMap change → file content, p99', percentile(latencies, 99), 'ms', {
      name: 'bare watch p99',
      value: percentile(watchLatencies, 99),
    });
    figure('configMap change → file content, max', Math.max(...latencies), 'ms');
    goal('P3 p99', percentile(latencies, 99), 250, ' ms');
    await deleteAllPods(api, p, PODS);
  } finally {
    await p.stop();
  }
} finally {
  await api.close();
  tmp.cleanup();
}
