// What every bench shares: sizes from arguments/env (full by default, small
// with --smoke), the private mount namespace, a temp root that is left empty,
// a podvol child process whose log lines are read as they come (so an
// operation's end is timed without polling /status), and the printing of
// figures with their ratio against a baseline measured in the same run.
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshBundle } from '../bin/fresh-bundle.js';
import { freePort, type LogLine, type PodvolProcess, spawnPodvol } from '../test/helpers/daemon.ts';
import { procMemory } from '../test/helpers/figures.ts';
import { isBelow, mountPointsAtOrBelow, mountTable } from '../test/helpers/mounts.ts';

export const repoRoot = join(import.meta.dirname, '..');

/** --smoke (or BENCH_SMOKE=1): a small size that only shows the bench still works; CI runs it. */
export const smoke = process.argv.includes('--smoke') || process.env.BENCH_SMOKE === '1';

/** `--name=…` on the command line, else env BENCH_<NAME> (upper case, dashes as underscores). */
function argument(name: string): string | undefined {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  const raw = flag
    ? flag.slice(name.length + 3)
    : process.env[`BENCH_${name.toUpperCase().replaceAll('-', '_')}`];
  return raw === '' ? undefined : raw;
}

function positive(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name}: want a positive number, got "${raw}"`);
  return n;
}

/** A size: `--name=N` (or env BENCH_<NAME>), else `full`, or `small` under --smoke. */
export function size(name: string, full: number, small: number): number {
  const raw = argument(name);
  return raw === undefined ? (smoke ? small : full) : positive(name, raw);
}

/** One of `options` (`--name=…` or env BENCH_<NAME>), the first by default; anything else is an error. */
export function choice<T extends string>(name: string, options: readonly [T, ...T[]]): T {
  const raw = argument(name) ?? options[0];
  const found = options.find((o) => o === raw);
  if (found === undefined) throw new Error(`--${name} must be one of ${options.join(', ')}, got "${raw}"`);
  return found;
}

/** Several sizes: `--name=1,10,50` (or env BENCH_<NAME>), else `full`, or `small` under --smoke. */
export function sizes(name: string, full: number[], small: number[]): number[] {
  const raw = argument(name);
  return raw === undefined ? (smoke ? small : full) : raw.split(',').map((r) => positive(name, r));
}

/**
 * Benches that mount run inside a private mount namespace: re-executes this
 * script under `unshare --mount --propagation private` unless already inside
 * one (npm test's, or a previous re-exec). Without root there is nothing to
 * measure: it says so and exits 0, or 1 under CI=true.
 */
export function ensureMountNamespace(): void {
  if (process.env.PODVOL_MOUNTNS === '1') return;
  if (process.getuid?.() !== 0) {
    console.log(`# ${process.argv[1]}: needs root to mount; skipped`);
    process.exit(process.env.CI === 'true' ? 1 : 0);
  }
  const r = spawnSync(
    'unshare',
    ['--mount', '--propagation', 'private', '--', process.execPath, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, PODVOL_MOUNTNS: '1' } },
  );
  process.exit(r.status ?? 1);
}

/** Mount ids below `dir` (to show a restart left the mount table as it was). */
export function mountIdsBelow(dir: string): string[] {
  return mountTable()
    .filter((m) => isBelow(m.mountPoint, dir))
    .map((m) => String(m.id))
    .sort();
}

/** A temp directory; `cleanup()` unmounts anything left below it, removes it, and says whether something was left. */
export function tempRoot(prefix: string): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), `podvol-bench-${prefix}-`));
  return {
    dir,
    cleanup() {
      const left = mountPointsAtOrBelow(dir);
      for (const m of left) spawnSync('umount', ['-l', m], { stdio: 'ignore', timeout: 30_000 });
      if (left.length > 0) console.log(`# cleanup: ${left.length} mounts were left below ${dir}`);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type { LogLine };
export { freePort };

/** A bench's podvol: the test helper's process, with what benches measure. */
export interface Podvol extends PodvolProcess {
  /** Log lines so far whose msg is `msg`. */
  count(msg: string): number;
  /** Polls `path` every `everyMs` until it answers 200; returns performance.now() of that answer. */
  until200(path: string, everyMs?: number, timeoutMs?: number): Promise<number>;
  /** VmRSS and VmHWM of the process, in MiB. */
  memory(): { rss: number; hwm: number };
}

/**
 * `podvol run` as a child process (test/helpers/daemon.ts's spawnPodvol), not
 * waited for: a bench times its start itself. Its log is not kept (thousands
 * of lines), only counted and passed to onLine listeners as it arrives.
 */
export async function startPodvol(o: {
  rootDir: string;
  manifests?: string;
  kubeconfig?: string;
  nodeName?: string;
  extra?: string[];
  /** Node flags for podvol, before BENCH_PODVOL_NODE_ARGS' (e.g. the memory bench's --inspect-port). */
  nodeArgs?: string[];
}): Promise<Podvol> {
  const p = await spawnPodvol({
    ...o,
    nodeName: o.nodeName ?? 'benchnode',
    extra: ['--systemd-scope', 'off', ...(o.extra ?? [])],
    // BENCH_PODVOL_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"): Node flags for podvol, for profiling.
    nodeArgs: [
      ...(o.nodeArgs ?? []),
      ...(process.env.BENCH_PODVOL_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ],
    // BENCH_PODVOL_BIN: another checkout's bin/podvol.js (bench/against.ts runs main's this way).
    bin: process.env.BENCH_PODVOL_BIN || undefined,
    // BENCH_PODVOL_WRAP (e.g. "strace -f -e trace=execve -o /tmp/x"): runs podvol under a tool, for profiling.
    wrap: process.env.BENCH_PODVOL_WRAP?.split(' ').filter(Boolean),
    keepOutput: false,
  });
  // BENCH_PODVOL_LOG=file: a copy of podvol's log, to time the stages of an operation afterwards.
  if (process.env.BENCH_PODVOL_LOG) p.proc.stdout?.pipe(createWriteStream(process.env.BENCH_PODVOL_LOG));
  const counts = new Map<string, number>();
  p.onLine((line) => {
    if (line.msg) counts.set(line.msg, (counts.get(line.msg) ?? 0) + 1);
  });
  return {
    ...p,
    count: (msg) => counts.get(msg) ?? 0,
    async until200(path, everyMs = 5, timeoutMs = 120_000) {
      const deadline = performance.now() + timeoutMs;
      while (performance.now() < deadline) {
        if (p.proc.exitCode !== null) throw new Error(`podvol exited ${p.proc.exitCode}: ${p.output()}`);
        try {
          if ((await p.get(path)).status === 200) return performance.now();
        } catch {
          // not listening yet
        }
        await sleep(everyMs);
      }
      throw new Error(`podvol: ${path} not 200 within ${timeoutMs} ms: ${p.output()}`);
    },
    memory: () => procMemory(p.proc.pid ?? 0),
  };
}

/**
 * The baseline process of the startup and memory benches: a bare Node HTTP
 * server, after `preload` (say, requiring @kubernetes/client-node). Its time
 * from spawn to the first 200, and its RSS `settleMs` after that.
 */
export async function bareNode(preload: string, settleMs: number): Promise<{ ms: number; rss: number }> {
  const port = await freePort();
  const code = `${preload}require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1');`;
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['-e', code], { stdio: 'ignore', cwd: repoRoot });
  try {
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/`);
        await res.arrayBuffer();
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (proc.exitCode !== null) throw new Error(`bare node exited ${proc.exitCode}`);
      await sleep(5);
    }
    const ms = performance.now() - t0;
    await sleep(settleMs);
    return { ms, rss: procMemory(proc.pid ?? 0).rss };
  } finally {
    proc.kill('SIGKILL');
  }
}

/** CPU seconds (user + system) a process has used so far, its children not counted. */
export function procCpuSeconds(pid: number): number {
  // /proc/<pid>/stat: fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resolves with performance.now() once `count` log lines with `msg` (and matching `filter`) have arrived. */
export function waitLines(
  p: Podvol,
  msg: string,
  count: number,
  timeoutMs = 600_000,
  filter: (l: LogLine) => boolean = () => true,
): Promise<number> {
  return new Promise((resolve, reject) => {
    let n = 0;
    if (count === 0) return resolve(performance.now());
    const timer = setTimeout(() => {
      off();
      reject(new Error(`only ${n} of ${count} "${msg}" log lines within ${timeoutMs} ms`));
    }, timeoutMs);
    const off = p.onLine((l, at) => {
      if (l.msg === 'MountVolume.SetUp failed' || l.msg === 'UnmountVolume.TearDown failed') {
        console.log(`# ${l.msg}: ${l.pod} ${l.volume}: ${String(l.err)}`);
      }
      if (l.msg !== msg || !filter(l)) return;
      if (++n === count) {
        clearTimeout(timer);
        off();
        resolve(at);
      }
    });
  });
}

/** Polls `fn` every `everyMs` until it is true; returns performance.now() then. */
export async function until(
  what: string,
  fn: () => boolean | Promise<boolean>,
  everyMs = 10,
  timeoutMs = 600_000,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await fn()) return performance.now();
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export { median, percentile, procMemory } from '../test/helpers/figures.ts';

/** Runs a bash script; returns its wall time in ms. Fails loudly. */
export function timeBash(script: string): number {
  const t0 = performance.now();
  // On stdin: a script of thousands of lines is too long for one argument (E2BIG).
  const r = spawnSync('bash', ['-e', '-s'], {
    input: script,
    stdio: ['pipe', 'ignore', 'pipe'],
    timeout: 1_200_000,
    maxBuffer: 1 << 26,
  });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`baseline script failed (${r.status ?? r.error}): ${r.stderr}`);
  return ms;
}

/** `loadavg` now, printed with every bench so a reader sees how loaded the machine was. */
export function header(title: string, sizes: Record<string, number | string>): void {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const s = Object.entries(sizes)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  // bin/podvol.js runs the bundle only while it is fresh (npm run build): say which ran.
  const code = freshBundle()
    ? 'podvol from dist/bundle'
    : 'podvol from sources (no fresh bundle: npm run build)';
  console.log(
    `\n## ${title}  (${s}${smoke ? ', smoke' : ''}; node ${process.version}; ${code}; loadavg ${load})`,
  );
}

const fmt = (v: number, unit: string) =>
  `${unit === 'ms' ? v.toFixed(v < 10 ? 2 : 0) : v.toFixed(1)} ${unit}`.padStart(12);

/** One figure, with its ratio against an in-run baseline when there is one. */
export function figure(
  name: string,
  value: number,
  unit: string,
  baseline?: { name: string; value: number },
) {
  const ratio = baseline ? `   ${(value / baseline.value).toFixed(2)}x ${baseline.name}` : '';
  console.log(`${name.padEnd(52)}${fmt(value, unit)}${ratio}`);
}

/** A figure measured against a goal of the issue: printed as met or not (never asserted). */
export function goal(name: string, value: number, limit: number, unit: string): void {
  console.log(
    `goal ${name}: ${value.toFixed(2)}${unit} vs <= ${limit}${unit}: ${value <= limit ? 'MET' : 'NOT MET'}`,
  );
}
