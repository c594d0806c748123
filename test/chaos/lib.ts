// What every chaos suite shares: its size (short in CI, longer under
// `npm run chaos`), figures printed as `chaos figure: <name>: <value>`, a
// canary tree outside the pod directories that must never change, and the
// mount-table checks for leaked and lost mounts. Suites assert counts (0
// leaks, 0 crashes...), never timings: timings are figures.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { startTestApiServer } from '../apiserver/server.ts';
import { daemonDirs, type PodvolProcess, startPodvol } from '../helpers/daemon.ts';
import { median, percentile, procMemory } from '../helpers/figures.ts';
import { tempDir } from '../helpers/mountns.ts';

/** `npm run chaos` sets PODVOL_CHAOS=full; `npm test` (CI) runs the short version. */
export const FULL = process.env.PODVOL_CHAOS === 'full';

/** Short in CI, long under `npm run chaos`. */
export const size = (short: number, full: number) => (FULL ? full : short);

export function figure(t: TestContext, name: string, value: string | number): void {
  t.diagnostic(`chaos figure: ${name}: ${value}`);
}

/** A deterministic pseudo-random sequence (a failing run can be replayed with its seed). */
export function random(seed = Number(process.env.PODVOL_CHAOS_SEED ?? Date.now() % 100_000)) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  return { seed, next, int: (n: number) => Math.floor(next() * n) };
}

/** Digest of every entry below `dir` (type, mode, content or link target), without following links. */
export async function treeDigest(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string, rel: string) => {
    for (const name of (await readdir(d)).sort()) {
      const p = join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = await lstat(p);
      if (st.isDirectory()) {
        out.set(r, `dir ${st.mode}`);
        await walk(p, r);
      } else if (st.isSymbolicLink()) out.set(r, `link ${await readlink(p)}`);
      else
        out.set(
          r,
          `file ${st.mode} ${createHash('sha256')
            .update(await readFile(p))
            .digest('hex')}`,
        );
    }
  };
  await walk(dir, '');
  return out;
}

/**
 * A tree of precious files outside the pod directories (what a symlink or a
 * `..` would reach); `changes()` lists every entry added, removed or changed.
 */
export async function canary(dir: string): Promise<{ path: string; changes(): Promise<string[]> }> {
  await mkdir(join(dir, 'nested', 'deeper'), { recursive: true });
  for (const f of ['a', 'nested/b', 'nested/deeper/c', 'etc-passwd'])
    await writeFile(join(dir, f), `precious ${f}\n`, { mode: 0o640 });
  const before = await treeDigest(dir);
  return {
    path: dir,
    async changes() {
      const after = await treeDigest(dir).catch(() => new Map<string, string>());
      const keys = new Set([...before.keys(), ...after.keys()]);
      return [...keys].filter((k) => before.get(k) !== after.get(k));
    },
  };
}

/** Percentiles of a list of milliseconds, for figures. */
export function pct(ms: number[]): string {
  if (ms.length === 0) return 'none';
  return `p50 ${median(ms).toFixed(0)} ms, max ${percentile(ms, 100).toFixed(0)} ms (n=${ms.length})`;
}

/**
 * A suite's temp tree (root, manifests, a canary beside them), optionally a
 * test API server with the Node, and its podvol: `start()` runs one (the
 * previous one is the caller's to stop), counting in `state.crashes` every
 * exit nobody asked for. The daemon and the API server are stopped before the
 * tree is removed (after hooks run in the order they were registered).
 */
export async function chaosSetup(t: TestContext, opts: { api?: boolean } = {}) {
  const state: { daemon: PodvolProcess | undefined; crashes: number } = { daemon: undefined, crashes: 0 };
  const api = opts.api ? await startTestApiServer() : undefined;
  t.after(async () => {
    await state.daemon?.stop('SIGKILL');
    await api?.close();
  });
  const base = await tempDir(t);
  const { root, manifests } = await daemonDirs(base);
  const guard = await canary(join(base, 'canary'));
  const kubeconfig = api ? await api.kubeconfigPath(base) : undefined;
  api?.store.create('nodes', {
    metadata: { name: 'testnode' },
    status: { allocatable: { cpu: '2', memory: '4Gi' } },
  });
  const start = async (extra: string[] = []) => {
    const p = await startPodvol({
      rootDir: root,
      manifests,
      extra: [...(kubeconfig ? ['--kubeconfig', kubeconfig] : []), ...extra],
    });
    p.proc.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL' && signal !== 'SIGTERM' && code !== 0) state.crashes++;
    });
    state.daemon = p;
    return p;
  };
  return { api, base, root, manifests, guard, start, state };
}

/** A process's peak resident memory (VmHWM) in MiB, for figures. */
export function peakRssMiB(pid: number | undefined): string {
  try {
    return `${procMemory(pid ?? 0).hwm.toFixed(0)} MiB`;
  } catch {
    return 'NaN MiB';
  }
}
