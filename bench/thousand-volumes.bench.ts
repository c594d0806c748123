// Finding 5: one pod with 1,000 downwardAPI volumes (each a tmpfs wrapper plus
// atomic-writer files). Runs the real daemon (as root, in a private mount
// namespace) on such a static pod, waits until every volume is mounted, removes
// the pod and waits until every mount is gone, and prints podvol's peak RSS
// (VmHWM) and the times, next to a baseline measured in the same run: the same
// pod with the operation pool opened up to 1,000 (every operation at once, as
// before the pool). With --cgroup it also runs each daemon inside a fresh
// cgroup v1/v2 memory cgroup of 256 MiB (the DaemonSet's limit) and reports
// whether it was OOM-killed. /healthz is probed every 250 ms throughout, and
// its latency printed for the set-up and the teardown separately (the goal:
// p99 within 100 ms under any load). --no-baseline runs the default pool only
// (e.g. with NODE_OPTIONS=--cpu-prof to profile the daemon under this load).
// Run (root): node bench/thousand-volumes.bench.ts [volumes] [--cgroup] [--no-baseline]
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorMessage } from '../src/errno.ts';
import { runtimeSocketOf } from '../test/helpers/daemon.ts';
import { freePort, percentile, procMemory } from './lib.ts';

const VOLUMES = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 1000);
const USE_CGROUP = process.argv.includes('--cgroup');
const NO_BASELINE = process.argv.includes('--no-baseline');
const LIMIT = 256 * 1024 * 1024;
const repo = join(import.meta.dirname, '..');

if (process.getuid?.() !== 0) {
  console.log('thousand-volumes bench: needs root (real tmpfs mounts); skipped');
  process.exit(0);
}

function manifest(): string {
  const names = Array.from({ length: VOLUMES }, (_, i) => `v${i}`);
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'many', namespace: 'default', labels: { app: 'many' } },
    spec: {
      containers: [
        {
          name: 'c',
          image: 'busybox',
          resources: { limits: { memory: '64Mi' } },
          volumeMounts: names.map((n) => ({ name: n, mountPath: `/${n}` })),
        },
      ],
      volumes: names.map((n) => ({
        name: n,
        downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
      })),
    },
  });
}

/** A memory cgroup of LIMIT bytes for `pid` (v2 if mounted unified, else v1); returns how to read it. */
function cgroupFor(pid: number): { peak(): number; oomKilled(): boolean; remove(): void } | undefined {
  const self = readFileSync('/proc/self/cgroup', 'utf8');
  const v1 = /^\d+:memory:(.*)$/m.exec(self)?.[1];
  const base =
    v1 !== undefined
      ? join('/sys/fs/cgroup/memory', v1)
      : join('/sys/fs/cgroup', /^0::(.*)$/m.exec(self)?.[1] ?? '');
  const dir = join(base, `podvol-bench-${process.pid}-${pid}`);
  try {
    mkdirSync(dir);
    if (v1 !== undefined) {
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(LIMIT));
      writeFileSync(join(dir, 'cgroup.procs'), String(pid));
      return {
        peak: () => Number(readFileSync(join(dir, 'memory.max_usage_in_bytes'), 'utf8')),
        oomKilled: () => /oom_kill [1-9]/.test(readFileSync(join(dir, 'memory.oom_control'), 'utf8')),
        remove: () => rmdirSync(dir),
      };
    }
    writeFileSync(join(dir, 'memory.max'), String(LIMIT));
    writeFileSync(join(dir, 'cgroup.procs'), String(pid));
    return {
      peak: () => Number(readFileSync(join(dir, 'memory.peak'), 'utf8')),
      oomKilled: () => /oom_kill [1-9]/.test(readFileSync(join(dir, 'memory.events'), 'utf8')),
      remove: () => rmdirSync(dir),
    };
  } catch (err) {
    console.log(`# no memory cgroup (${errorMessage(err)}); peak RSS only`);
    return undefined;
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, ms = 1_800_000): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // A failed request is retried; podvol's death ends the wait (an OOM kill is a result).
    const v = await fn().catch((err: Error) => {
      if (err.message.startsWith('podvol exited')) throw err;
      return undefined;
    });
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out: ${what}`);
}

async function run(label: string, pool: number | undefined) {
  const base = mkdtempSync(join(tmpdir(), 'podvol-bench-1000-'));
  const manifests = join(base, 'manifests');
  mkdirSync(manifests);
  writeFileSync(join(manifests, 'many.json'), manifest());
  const port = await freePort();
  const args = [
    '--mount',
    '--propagation',
    'private',
    '--',
    process.execPath,
    // Node flags for podvol (e.g. --cpu-prof), as every bench takes them.
    ...(process.env.BENCH_PODVOL_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    join(repo, 'bin/podvol.js'),
    'run',
    '--root-dir',
    join(base, 'root'),
    '--pod-manifest-path',
    manifests,
    '--node-name',
    'bench',
    '--listen',
    `127.0.0.1:${port}`,
    '--log-level',
    'warn',
    // Beside the root directory, never the host's /run/podvol.
    '--runtime-socket',
    runtimeSocketOf(join(base, 'root')),
    ...(pool ? ['--max-concurrent-operations', String(pool)] : []),
  ];
  const child = spawn('unshare', args, { stdio: ['ignore', 'ignore', 'inherit'] });
  // unshare execs node: the same pid.
  const cg = USE_CGROUP && child.pid !== undefined ? cgroupFor(child.pid) : undefined;
  let hwm = 0;
  let exited: number | string | null = null;
  child.on('exit', (code, signal) => {
    exited = signal ?? code;
  });
  const sample = setInterval(() => {
    try {
      hwm = Math.max(hwm, procMemory(child.pid ?? 0).hwm * 1024 * 1024);
    } catch {}
  }, 100);
  const status = async () =>
    (await fetch(`http://127.0.0.1:${port}/status`)).json() as Promise<{
      pods: { volumes: { state: string }[] }[];
    }>;
  // /healthz while the pod is set up and torn down: one request at a time, every 250 ms.
  const health = { setUp: [] as number[], tearDown: [] as number[] };
  let phase: keyof typeof health = 'setUp';
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const h0 = performance.now();
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) health[phase].push(performance.now() - h0);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const t0 = performance.now();
  let mountedMs = Number.NaN;
  let tornDownMs = Number.NaN;
  // What this run measured, at the moment it ends (however it ends).
  const figures = () => ({
    label,
    mountedMs,
    tornDownMs,
    health,
    hwm,
    peak: cg?.peak(),
    oom: cg?.oomKilled() ?? false,
    exited,
  });
  try {
    await waitFor('all mounted', async () => {
      if (exited !== null) throw new Error(`podvol exited (${exited})`);
      const s = await status();
      const vols = s.pods[0]?.volumes ?? [];
      return vols.length === VOLUMES && vols.every((v) => v.state === 'mounted') ? true : undefined;
    });
    mountedMs = performance.now() - t0;
    rmSync(join(manifests, 'many.json'));
    phase = 'tearDown';
    const t1 = performance.now();
    await waitFor('all torn down', async () => {
      if (exited !== null) throw new Error(`podvol exited (${exited})`);
      const s = await status();
      return s.pods.length === 0 ? true : undefined;
    });
    tornDownMs = performance.now() - t1;
    return figures();
  } catch (err) {
    return { ...figures(), err: errorMessage(err) };
  } finally {
    probing = false;
    await prober;
    clearInterval(sample);
    child.kill('SIGTERM');
    await new Promise((r) => (exited === null ? child.once('exit', r) : r(null)));
    cg?.remove();
    // The daemon's mounts lived in its own mount namespace and are gone with it.
    if (existsSync(base)) rmSync(base, { recursive: true, force: true });
  }
}

function healthFigures(ms: number[]): string {
  if (ms.length === 0) return 'never answered';
  const p = (q: number) => percentile(ms, q).toFixed(0);
  return `p50 ${p(50)} ms, p99 ${p(99)} ms, max ${p(100)} ms (${ms.length} probes)`;
}
const mib = (b: number | undefined) => (b === undefined ? '-' : `${(b / 1024 / 1024).toFixed(0)} MiB`);
console.log(
  `thousand-volumes bench: one pod with ${VOLUMES} downwardAPI volumes${USE_CGROUP ? `, each daemon in a ${mib(LIMIT)} memory cgroup` : ''}`,
);
// Each line as soon as its run ends: a run takes minutes on a busy machine.
const results = [];
for (const [label, pool] of [
  ['pool (default)', undefined],
  ['baseline: pool of 1000', 1000],
] as const) {
  if (NO_BASELINE && pool !== undefined) continue;
  const r = await run(label, pool);
  results.push(r);
  console.log(
    `  ${r.label.padEnd(24)} peak RSS ${mib(r.hwm).padStart(8)}  cgroup peak ${mib(r.peak).padStart(8)}  OOM-killed ${r.oom ? 'YES' : 'no'}  all mounted ${(r.mountedMs / 1000).toFixed(1)} s  torn down ${(r.tornDownMs / 1000).toFixed(1)} s  /healthz during set-up ${healthFigures(r.health.setUp)}, during teardown ${healthFigures(r.health.tearDown)}${'err' in r ? `  ERROR ${r.err}` : ''}`,
  );
}
const [pooled, baseline] = results;
if (pooled && baseline)
  console.log(`  peak RSS ratio pool/baseline: ${(pooled.hwm / baseline.hwm).toFixed(2)}`);
