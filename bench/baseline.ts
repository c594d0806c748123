// The in-run baselines for set-up and teardown: the very steps `podvol plan`
// lists for the same pods (same mounts with the same options, same files with
// the same modes and sizes, same symlinks and renames), done by
// - a shell script, one command per step (what the issue compares against), and
// - a bare loop of synchronous syscalls that spawns only mount(8)/umount(8):
//   the floor, "the cost of the mount calls themselves".
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './lib.ts';

export interface PlanStep {
  phase: 'setup' | 'teardown';
  pod: string;
  volume: string;
  action: string;
  path: string;
  detail: string;
}

/** `podvol plan -o json` for a manifest file, with `..<timestamp>` made concrete. */
export function planSteps(manifest: string, rootDir: string, nodeName: string): PlanStep[] {
  const r = spawnSync(
    process.execPath,
    [
      join(repoRoot, 'bin', 'podvol.js'),
      'plan',
      '-f',
      manifest,
      '--root-dir',
      rootDir,
      '--node-name',
      nodeName,
      '-o',
      'json',
    ],
    { encoding: 'utf8', maxBuffer: 1 << 30, timeout: 600_000 },
  );
  if (r.status !== 0) throw new Error(`podvol plan failed (${r.status}): ${r.stderr}`);
  const steps = JSON.parse(r.stdout) as PlanStep[];
  const ts = '..2026_01_01_00_00_00.000000000';
  for (const s of steps) {
    s.path = s.path.replaceAll('..<timestamp>', ts);
    s.detail = s.detail.replaceAll('..<timestamp>', ts);
  }
  return steps;
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const writeDetail = (d: string) => {
  const m = /mode (\d+), (\d+) bytes/.exec(d);
  if (!m) throw new Error(`unexpected write detail "${d}"`);
  const [, octal = '', bytes = ''] = m;
  return { mode: Number.parseInt(octal, 8), bytes: Number(bytes), octal };
};

/** The steps of one phase as a bash script, one command per step (writes with the printf builtin). */
export function shellScript(steps: PlanStep[], phase: 'setup' | 'teardown'): string {
  const out: string[] = ['umask 022'];
  for (const s of steps) {
    if (s.phase !== phase) continue;
    switch (s.action) {
      case 'mkdir':
        out.push(`mkdir -p -m ${s.detail} ${q(s.path)}`);
        break;
      case 'mount':
        out.push(`mount ${s.detail} ${q(s.path)}`);
        break;
      case 'chmod':
        out.push(`chmod ${s.detail} ${q(s.path)}`);
        break;
      case 'write': {
        const w = writeDetail(s.detail);
        out.push(`printf '%*s' ${w.bytes} '' > ${q(s.path)}`);
        if (w.octal !== '0644') out.push(`chmod ${w.octal} ${q(s.path)}`);
        break;
      }
      case 'symlink':
        out.push(`ln -s ${q(s.detail)} ${q(s.path)}`);
        break;
      case 'rename':
        out.push(`mv -T ${q(s.path)} ${q(s.detail)}`);
        break;
      case 'umount':
        out.push(`umount ${q(s.path)}`);
        break;
      case 'rm':
        out.push(`rm -rf ${q(s.path)}`);
        break;
      default:
        throw new Error(`the shell baseline has no ${s.action} step (${s.path})`);
    }
  }
  return out.join('\n');
}

/** The steps of one phase as synchronous syscalls; only mount and umount spawn. Returns ms. */
export function bareLoop(steps: PlanStep[], phase: 'setup' | 'teardown'): number {
  const t0 = performance.now();
  for (const s of steps) {
    if (s.phase !== phase) continue;
    switch (s.action) {
      case 'mkdir':
        mkdirSync(s.path, { recursive: true, mode: Number.parseInt(s.detail, 8) });
        break;
      case 'mount': {
        const r = spawnSync('mount', [...s.detail.split(' '), s.path], { stdio: 'ignore', timeout: 60_000 });
        if (r.status !== 0) throw new Error(`mount ${s.detail} ${s.path} failed`);
        break;
      }
      case 'chmod':
        chmodSync(s.path, Number.parseInt(s.detail, 8));
        break;
      case 'write': {
        const w = writeDetail(s.detail);
        writeFileSync(s.path, Buffer.alloc(w.bytes, 0x20), { mode: w.mode });
        chmodSync(s.path, w.mode);
        break;
      }
      case 'symlink':
        symlinkSync(s.detail, s.path);
        break;
      case 'rename':
        renameSync(s.path, s.detail);
        break;
      case 'umount': {
        const r = spawnSync('umount', [s.path], { stdio: 'ignore', timeout: 60_000 });
        if (r.status !== 0) throw new Error(`umount ${s.path} failed`);
        break;
      }
      case 'rm':
        rmSync(s.path, { recursive: true, force: true });
        break;
      default:
        throw new Error(`the bare baseline has no ${s.action} step (${s.path})`);
    }
  }
  return performance.now() - t0;
}

/** A pod with the given volumes that one container mounts, as a static manifest document. */
export function podDoc(name: string, volumes: unknown[], extra: Record<string, unknown> = {}): string {
  const names = volumes.map((v) => (v as { name: string }).name);
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', labels: { app: 'bench', pod: name } },
    spec: {
      containers: [
        { name: 'app', image: 'busybox', volumeMounts: names.map((n) => ({ name: n, mountPath: `/${n}` })) },
      ],
      volumes,
      ...extra,
    },
  });
}

/**
 * The P1/P5 pod: three volumes that each mount a tmpfs (an emptyDir in memory,
 * a downwardAPI and a projected volume), two of them with atomic-writer files.
 * Standalone mode, so no API server is involved.
 */
export function threeVolumePod(i: number): string {
  return podDoc(`bench-${i}`, [
    { name: 'scratch', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
    {
      name: 'podinfo',
      downwardAPI: {
        items: [
          { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
          { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
        ],
      },
    },
    {
      name: 'proj',
      projected: {
        sources: [
          { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
        ],
      },
    },
  ]);
}

/** N documents in one YAML stream (JSON documents are YAML). */
export const manifestStream = (docs: string[]) => `${docs.join('\n---\n')}\n`;
