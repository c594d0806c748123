// npm run bench: every bench at full size, one after the other (the machine's
// cores are the resource being measured), inside one private mount namespace.
// `npm run bench -- --smoke` runs each at a small size (what CI runs); other
// arguments (--pods=…, --rounds=…) are passed to every bench. BENCH_AGAINST=<commit>
// compares with that commit's podvol (bench/against.ts).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ensureMountNamespace } from './lib.ts';

/**
 * Every bench: `args` it always takes, and the arguments its --smoke run takes
 * when it reads positional sizes.
 */
export const benches: { file: string; figure: string; args?: string[]; smokeArgs?: string[] }[] = [
  { file: 'mountinfo.bench.ts', figure: 'P6 mountinfo parse', smokeArgs: ['1000', '5'] },
  { file: 'startup.bench.ts', figure: 'start → /healthz' },
  { file: 'setup-teardown.bench.ts', figure: 'P1 set-up and teardown' },
  { file: 'pod-latency.bench.ts', figure: 'P2 pod added → volumes ready' },
  {
    file: 'pod-latency.bench.ts',
    figure: "P2 with issue 20's shared shape, against its floor",
    args: ['--shape=shared'],
  },
  { file: 'configmap-change.bench.ts', figure: 'P3 configMap change → file' },
  { file: 'memory.bench.ts', figure: 'P4 resident memory' },
  { file: 'restart.bench.ts', figure: 'P5 restart → /readyz' },
  { file: 'apiload.bench.ts', figure: 'API server load per pod' },
  { file: 'fsgroup.bench.ts', figure: 'fsGroup walk', smokeArgs: ['2000', '500', '1'] },
  { file: 'runtime-mounts.bench.ts', figure: 'runtime socket: mounts endpoint, podvol wait' },
  { file: 'spawn.bench.ts', figure: 'process spawns: main thread, worker, spawner' },
];

export function benchArgs(b: (typeof benches)[number], smoke: boolean, extra: string[]): string[] {
  return [
    join(import.meta.dirname, b.file),
    ...(b.args ?? []),
    ...(smoke ? (b.smokeArgs ?? ['--smoke']) : []),
    ...extra,
  ];
}

if (import.meta.main) {
  ensureMountNamespace();
  // BENCH_AGAINST=<commit>: the same benches, against that commit's podvol, in alternating pairs.
  if (process.env.BENCH_AGAINST) {
    const r = spawnSync(
      process.execPath,
      [join(import.meta.dirname, 'against.ts'), ...process.argv.slice(2)],
      {
        stdio: 'inherit',
      },
    );
    process.exit(r.status ?? 1);
  }
  const smoke = process.argv.includes('--smoke');
  const extra = process.argv.slice(2).filter((a) => a !== '--smoke');
  const only = process.env.BENCH_ONLY;
  const failed: string[] = [];
  for (const b of benches) {
    if (only && !b.file.includes(only)) continue;
    const r = spawnSync(process.execPath, benchArgs(b, smoke, extra), { stdio: 'inherit' });
    if (r.status !== 0) failed.push(b.file);
  }
  if (failed.length > 0) {
    console.error(`\nfailed: ${failed.join(', ')}`);
    process.exit(1);
  }
}
