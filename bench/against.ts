// BENCH_AGAINST=<commit> npm run bench: every figure of this checkout against
// the podvol of another commit (main before a change, say), measured in the
// same run, in alternating pairs (other, this; this, other; …) so that the
// machine's drift over the run falls on both sides alike. The benches are this
// checkout's, and so are their baselines: only the podvol they start differs
// (BENCH_PODVOL_BIN, read by bench/lib.ts's startPodvol). Prints, per figure,
// the median of each side, every run's value, and the ratio this ÷ other.
//
// BENCH_PAIRS (default 2) pairs per bench; BENCH_ONLY selects benches as for
// `npm run bench`; --smoke and sizes are passed to every bench as usual. The
// other commit is checked out in a temporary worktree (its native addon built,
// its bundle built when this checkout runs from a fresh bundle too, so both
// sides run the same way), removed at the end.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshBundle } from '../bin/fresh-bundle.js';
import { median } from '../test/helpers/figures.ts';
import { repoRoot } from './lib.ts';
import { benchArgs, benches } from './run.ts';

type Side = 'other' | 'this';

function git(args: string[], cwd = repoRoot): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr.trim() || r.error}`);
  return r.stdout.trim();
}

function node(args: string[], cwd: string): void {
  const r = spawnSync(process.execPath, args, { cwd, stdio: 'inherit', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed in ${cwd}`);
}

/** The other commit's tree, ready to run: node_modules shared, its own addon and (if this side has one) bundle. */
function checkout(commit: string): { sha: string; bin: string; remove(): void } {
  const sha = git(['rev-parse', '--verify', `${commit}^{commit}`]);
  const dir = mkdtempSync(join(tmpdir(), 'podvol-bench-against-'));
  const tree = join(dir, 'tree');
  git(['worktree', 'add', '--detach', tree, sha]);
  const remove = () => {
    spawnSync('git', ['worktree', 'remove', '--force', tree], { cwd: repoRoot, timeout: 120_000 });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    symlinkSync(join(repoRoot, 'node_modules'), join(tree, 'node_modules'));
    if (existsSync(join(tree, 'scripts/build-native.mjs'))) node(['scripts/build-native.mjs'], tree);
    else if (existsSync(join(repoRoot, 'native/peercred/build')))
      cpSync(join(repoRoot, 'native/peercred/build'), join(tree, 'native/peercred/build'), {
        recursive: true,
      });
    if (freshBundle()) node(['scripts/build-bundle.mjs'], tree);
    return { sha, bin: join(tree, 'bin', 'podvol.js'), remove };
  } catch (err) {
    remove();
    throw err;
  }
}

/** One run of a bench against one side: its output echoed, its figures parsed. */
function runBench(
  args: string[],
  bin: string | undefined,
): Promise<Map<string, { value: number; unit: string }>> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, BENCH_PODVOL_BIN: bin ?? '' };
    const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      process.stdout.write(d);
    });
    proc.once('error', reject);
    proc.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench ${args[0]} exited ${code}`));
      resolve(parseFigures(out));
    });
  });
}

/** lib.ts's figure() lines: the name in 52 columns, then the value and its unit. */
export function parseFigures(out: string): Map<string, { value: number; unit: string }> {
  const figures = new Map<string, { value: number; unit: string }>();
  for (const line of out.split('\n')) {
    const m = /^\s*(-?\d+(?:\.\d+)?) (\S+)/.exec(line.slice(52));
    const name = line.slice(0, 52).trim();
    if (m && name && !line.startsWith('#') && !line.startsWith('goal ')) {
      figures.set(name, { value: Number(m[1]), unit: m[2] ?? '' });
    }
  }
  return figures;
}

if (import.meta.main) {
  const commit = process.env.BENCH_AGAINST;
  if (!commit) throw new Error('BENCH_AGAINST=<commit> names the podvol to compare with');
  const pairs = Number(process.env.BENCH_PAIRS ?? 2);
  const smoke = process.argv.includes('--smoke');
  const extra = process.argv.slice(2).filter((a) => a !== '--smoke');
  const only = process.env.BENCH_ONLY;
  const other = checkout(commit);
  const head = git(['rev-parse', '--short', 'HEAD']);
  const dirty =
    git(['status', '--porcelain', '--untracked-files=no']) !== '' ? ' with uncommitted changes' : '';
  try {
    for (const b of benches) {
      if (only && !b.file.includes(only)) continue;
      const values = new Map<string, Record<Side, number[]> & { unit: string }>();
      for (let i = 0; i < pairs; i++) {
        const order: Side[] = i % 2 === 0 ? ['other', 'this'] : ['this', 'other'];
        for (const side of order) {
          console.log(
            `\n# ${b.file}, pair ${i + 1} of ${pairs}: ${side === 'other' ? other.sha.slice(0, 7) : `${head}${dirty}`}`,
          );
          const figures = await runBench(
            benchArgs(b, smoke, extra),
            side === 'other' ? other.bin : undefined,
          );
          for (const [name, f] of figures) {
            const v = values.get(name) ?? { other: [], this: [], unit: f.unit };
            v[side].push(f.value);
            values.set(name, v);
          }
        }
      }
      console.log(
        `\n## ${b.figure}: ${head}${dirty} against ${other.sha.slice(0, 7)} (${pairs} alternating pairs)`,
      );
      console.log(`${'figure'.padEnd(52)}${'other'.padStart(12)}${'this'.padStart(12)}   this ÷ other`);
      for (const [name, v] of values) {
        if (v.other.length === 0 || v.this.length === 0) continue;
        const a = median(v.other);
        const t = median(v.this);
        console.log(
          `${name.padEnd(52)}${`${a.toFixed(1)} ${v.unit}`.padStart(12)}${`${t.toFixed(1)} ${v.unit}`.padStart(12)}   ${(t / a).toFixed(2)}x   (other ${v.other.join('/')}; this ${v.this.join('/')})`,
        );
      }
    }
  } finally {
    other.remove();
  }
}
