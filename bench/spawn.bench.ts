// Process spawns (issue 20): what one `mount`/`umount` process costs podvol to
// start at its size. Node starts a child with fork(2) then exec (libuv; no
// CLONE_VM on Linux), and fork copies the page tables of the whole process and
// makes every page copy-on-write, so the cost grows with the RSS. Each case runs
// in a process of its own (this script with --case=…): sequential spawns of
// /bin/true and `mount --version` through podvol's runners of src/mount/exec.ts
// (execa on the main thread, the spawning worker thread, the fallback),
// from a fresh minimal Node process (the floor: the same spawn from the
// smallest process of the same kind, measured in the same run) and from one
// whose heap was grown to --heap-mib of live objects (podvol with pods), and,
// from that large process, through a long-lived spawner: a small Node child
// that starts the processes on request (one JSON line each way), and through
// podvol's posix_spawn runner (native/spawn: no fork, what the daemon uses).
// Per case: per-spawn wall ms p50/p99, the CPU the measuring process spent per
// spawn, and the event loop's p99 delay
// while spawning. Cases alternate over --rounds so the machine's drift falls on
// all of them.
// Run: node bench/spawn.bench.ts [--spawns=400] [--heap-mib=200] [--rounds=2] [--smoke]
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import {
  createExecaRunner,
  createSpawnRunner,
  createThreadRunner,
  type RunRequest,
} from '../src/mount/exec.ts';

type Thread = 'main' | 'worker' | 'spawner' | 'posix_spawn';
interface Case {
  thread: Thread;
  heapMiB: number;
  file: string;
  args: string[];
  spawns: number;
}
interface CaseResult {
  ms: number[];
  cpuMsPerSpawn: number;
  loopP99Ms: number;
  rssMiB: number;
}

/** The spawner's body: one request per line on stdin, one result per line on stdout; argv, never a shell. */
const SPAWNER = `
const { spawn } = require('node:child_process');
const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line);
  const c = spawn(req.file, req.args, { env, stdio: ['ignore', 'pipe', 'pipe'], shell: false, timeout: req.timeoutMs });
  const out = [];
  c.stdout.on('data', (b) => out.push(b));
  c.stderr.on('data', (b) => out.push(b));
  c.on('error', (err) => process.stdout.write(JSON.stringify({ id: req.id, error: err.code }) + '\\n'));
  c.on('close', (exitCode, signal) => process.stdout.write(JSON.stringify({ id: req.id, exitCode, signal, output: Buffer.concat(out).toString() }) + '\\n'));
});`;

/** A long-lived spawner process and a run() that sends it one request and waits for its answer. */
function startSpawner() {
  const proc = spawn(process.execPath, ['-e', SPAWNER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = new Map<number, (r: { exitCode?: number; error?: string }) => void>();
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const r = JSON.parse(line) as { id: number; exitCode?: number; error?: string };
    waiting.get(r.id)?.(r);
    waiting.delete(r.id);
  });
  let next = 0;
  return {
    run(req: RunRequest) {
      const id = next++;
      const done = new Promise<{ exitCode?: number; error?: string }>((resolve) => waiting.set(id, resolve));
      proc.stdin.write(`${JSON.stringify({ id, ...req })}\n`);
      return done;
    },
    close() {
      proc.stdin.end();
      return once(proc, 'exit');
    },
  };
}

/** Live objects until V8's used heap reaches `mib` (kept reachable by the caller). */
function inflate(mib: number): unknown[] {
  const keep: unknown[] = [];
  while (process.memoryUsage().heapUsed < mib * 2 ** 20) {
    for (let i = 0; i < 10_000; i++)
      keep.push({ name: `volume-${keep.length}`, opts: [i, i + 1], at: Date.now() });
  }
  return keep;
}

/** One case, in this process: the measuring side. */
async function runCase(c: Case): Promise<CaseResult> {
  const keep = inflate(c.heapMiB);
  const req: RunRequest = { file: c.file, args: c.args, timeoutMs: 10_000 };
  let run: (r: RunRequest) => Promise<{ exitCode?: number; error?: string }>;
  let close = async () => {};
  if (c.thread === 'main') {
    const r = createExecaRunner();
    run = async (q) => {
      const res = await r(q);
      return { exitCode: res.exitCode, error: res.spawnErrorCode };
    };
  } else if (c.thread === 'posix_spawn') {
    const r = createSpawnRunner();
    if (!r) throw new Error('native/spawn is not built');
    run = async (q) => {
      const res = await r(q);
      return { exitCode: res.exitCode, error: res.spawnErrorCode };
    };
  } else if (c.thread === 'worker') {
    const r = createThreadRunner();
    run = async (q) => {
      const res = await r(q);
      return { exitCode: res.exitCode, error: res.spawnErrorCode };
    };
    close = () => r.close();
  } else {
    const s = startSpawner();
    run = (q) => s.run(q);
    close = async () => {
      await s.close();
    };
  }
  // Warm-up: the worker thread, the spawner and execa's first call are not what is measured.
  for (let i = 0; i < 5; i++) await run(req);
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const ms: number[] = [];
  for (let i = 0; i < c.spawns; i++) {
    const t0 = performance.now();
    const r = await run(req);
    ms.push(performance.now() - t0);
    if (r.error || r.exitCode !== 0)
      throw new Error(`${c.file} ${c.args.join(' ')}: ${r.error ?? r.exitCode}`);
  }
  const cpu = process.cpuUsage(cpu0);
  loop.disable();
  const rssMiB = process.memoryUsage().rss / 2 ** 20;
  await close();
  if (keep.length < 0) throw new Error('unreachable: keeps the inflated heap alive until here');
  return {
    ms,
    cpuMsPerSpawn: (cpu.user + cpu.system) / 1000 / c.spawns,
    loopP99Ms: loop.percentile(99) / 1e6,
    rssMiB,
  };
}

const caseArg = process.argv.find((a) => a.startsWith('--case='));
if (caseArg) {
  const result = await runCase(JSON.parse(caseArg.slice('--case='.length)) as Case);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

// Imported only here: a case's process stays minimal (bench/lib.ts loads the test helpers).
const { figure, header, median, percentile, size } = await import('./lib.ts');
const SPAWNS = size('spawns', 400, 10);
const HEAP = size('heap-mib', 200, 20);
const ROUNDS = size('rounds', 2, 1);
const commands: { label: string; file: string; args: string[] }[] = [
  { label: '/bin/true', file: '/bin/true', args: [] },
  { label: 'mount --version', file: 'mount', args: ['--version'] },
];
const kinds: { thread: Thread; heapMiB: number; label: string }[] = [
  { thread: 'main', heapMiB: 0, label: 'main thread, fresh node' },
  { thread: 'main', heapMiB: HEAP, label: `main thread, heap ${HEAP} MiB` },
  { thread: 'worker', heapMiB: 0, label: 'worker, fresh node' },
  { thread: 'worker', heapMiB: HEAP, label: `worker, heap ${HEAP} MiB` },
  { thread: 'spawner', heapMiB: HEAP, label: `spawner, heap ${HEAP} MiB` },
  { thread: 'posix_spawn', heapMiB: 0, label: 'posix_spawn (podvol), fresh node' },
  { thread: 'posix_spawn', heapMiB: HEAP, label: `posix_spawn (podvol), heap ${HEAP} MiB` },
];

header('process spawns', { spawns: SPAWNS, heapMiB: HEAP, rounds: ROUNDS });
const results = new Map<string, { ms: number[]; cpu: number[]; loop: number[]; rss: number[] }>();
for (let round = 0; round < ROUNDS; round++) {
  for (const cmd of commands) {
    for (const k of kinds) {
      const c: Case = {
        thread: k.thread,
        heapMiB: k.heapMiB,
        file: cmd.file,
        args: cmd.args,
        spawns: SPAWNS,
      };
      const r = spawnSync(process.execPath, [import.meta.filename, `--case=${JSON.stringify(c)}`], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        timeout: 600_000,
        maxBuffer: 1 << 26,
      });
      if (r.status !== 0) throw new Error(`case ${JSON.stringify(c)} failed (${r.status ?? r.error})`);
      const res = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as CaseResult;
      const key = `${cmd.label}\0${k.label}`;
      const acc = results.get(key) ?? { ms: [], cpu: [], loop: [], rss: [] };
      acc.ms.push(...res.ms);
      acc.cpu.push(res.cpuMsPerSpawn);
      acc.loop.push(res.loopP99Ms);
      acc.rss.push(res.rssMiB);
      results.set(key, acc);
    }
  }
}

for (const cmd of commands) {
  console.log(`\n# ${cmd.label}: per spawn, ${SPAWNS * ROUNDS} sequential spawns per case`);
  const p = (label: string, q: number) => percentile(results.get(`${cmd.label}\0${label}`)?.ms ?? [], q);
  for (const k of kinds) {
    const acc = results.get(`${cmd.label}\0${k.label}`);
    if (!acc) continue;
    // The floor for each: the same runner in a fresh node; for the spawner, the worker at the same heap (podvol's fallback).
    const fresh = { main: 'main thread', worker: 'worker', posix_spawn: 'posix_spawn (podvol)' } as const;
    const base =
      k.thread === 'spawner'
        ? { label: `worker, heap ${HEAP} MiB`, name: 'worker same heap' }
        : { label: `${fresh[k.thread]}, fresh node`, name: 'fresh node' };
    const same = base.label === k.label;
    figure(
      `${cmd.label}, ${k.label}: p50`,
      p(k.label, 50),
      'ms',
      same ? undefined : { name: base.name, value: p(base.label, 50) },
    );
    figure(
      `${cmd.label}, ${k.label}: p99`,
      p(k.label, 99),
      'ms',
      same ? undefined : { name: base.name, value: p(base.label, 99) },
    );
    console.log(
      `${''.padEnd(52)}RSS ${median(acc.rss).toFixed(0)} MiB, CPU ${median(acc.cpu).toFixed(2)} ms per spawn in the measuring process, event loop p99 ${median(acc.loop).toFixed(1)} ms`,
    );
  }
}
