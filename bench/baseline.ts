// The in-run baselines for set-up and teardown: a fixed floor, the least the
// kernel and mount(8) must do to reach the end state kubelet's layout asks for
// the bench's three-volume pods (threeVolumePod below): the volume and plugin
// directories, one tmpfs per volume, the atomic writer's timestamped directory,
// files, `..data` and per-file symlinks, the ready markers; then the unmounts
// and the removal of the pod directory. The steps are written out here for
// that pod shape and never derived from podvol (`podvol plan`), so the floor
// stays the same work whatever podvol comes to do: a podvol that does more
// shows up as a larger ratio, not as a larger baseline. podvol's own records
// and checks are what the ratio measures. Run two ways:
// - a shell script, one command per step, and
// - a bare loop of synchronous syscalls that spawns only mount(8)/umount(8).
// P2's shared-shape pods (a configMap on disk, a downwardAPI on a tmpfs) have
// theirs in sharedShapeSteps, run by bench/p2-floor.ts as each pod arrives.
// sameEndState() checks, in every run, that the floor builds what podvol builds.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';

export interface FloorStep {
  phase: 'setup' | 'teardown';
  action: 'mkdir' | 'mount' | 'chmod' | 'write' | 'symlink' | 'rename' | 'umount' | 'rm';
  path: string;
  /** mkdir/chmod: octal mode; mount: mount(8)'s arguments before the target; write: content; symlink/rename: target. */
  detail: string;
}

const TS = '..2026_01_01_00_00_00.000000000';

/**
 * The steps of one pod directory of kubelet's layout under `root`, appended to
 * `steps`: the pod, volumes and plugins directories, then one call per volume.
 */
function podSteps(steps: FloorStep[], root: string, uid: string) {
  const add = (phase: FloorStep['phase'], action: FloorStep['action'], path: string, detail = '') =>
    steps.push({ phase, action, path, detail });
  const pod = join(root, 'pods', uid);
  for (const dir of [
    pod,
    join(pod, 'volumes'),
    join(pod, 'plugins'),
    join(pod, 'plugins', 'kubernetes.io~empty-dir'),
  ])
    add('setup', 'mkdir', dir, '0750');
  /** An emptyDir (or a volume wrapping one): a tmpfs of `tmpfsSize` bytes, or the disk when it is undefined. */
  const emptyDir = (plugin: string, name: string, tmpfsSize?: string) => {
    const dir = join(pod, 'volumes', plugin, name);
    add('setup', 'mkdir', dir, '0755');
    add('setup', 'chmod', dir, '0777');
    if (tmpfsSize !== undefined) {
      add('setup', 'mount', dir, `-t tmpfs -o size=${tmpfsSize},noswap tmpfs`);
      add('teardown', 'umount', dir);
    }
    const meta = join(
      pod,
      'plugins',
      'kubernetes.io~empty-dir',
      plugin === 'kubernetes.io~empty-dir' ? name : `wrapped_${name}`,
    );
    add('setup', 'mkdir', meta, '0750');
    add('setup', 'write', join(meta, 'ready'), '');
    return dir;
  };
  /** The atomic writer's first write of `content` into `dir`. */
  const files = (dir: string, content: Record<string, string>) => {
    add('setup', 'mkdir', join(dir, TS), '0755');
    for (const [f, text] of Object.entries(content)) add('setup', 'write', join(dir, TS, f), text);
    add('setup', 'symlink', join(dir, '..data_tmp'), TS);
    add('setup', 'rename', join(dir, '..data_tmp'), join(dir, '..data'));
    for (const f of Object.keys(content)) add('setup', 'symlink', join(dir, f), `..data/${f}`);
  };
  /** After the volumes' teardown steps: the pod directory's removal. */
  const removePod = () => add('teardown', 'rm', pod);
  return { emptyDir, files, removePod };
}

/** The floor's steps for pods bench-0 … bench-(n-1) of threeVolumePod under `root` (one directory per pod UID). */
export function floorSteps(root: string, uids: string[]): FloorStep[] {
  const steps: FloorStep[] = [];
  uids.forEach((uid, i) => {
    const { emptyDir, files, removePod } = podSteps(steps, root, uid);
    const name = `bench-${i}-benchnode`;
    emptyDir('kubernetes.io~empty-dir', 'scratch', '16777216');
    // A volume without a sizeLimit gets the node's memory as its size, as podvol (and kubelet) give it.
    const podinfo = emptyDir('kubernetes.io~downward-api', 'podinfo', String(totalmem()));
    files(podinfo, { labels: `app="bench"\npod="bench-${i}"`, name });
    const proj = emptyDir('kubernetes.io~projected', 'proj', String(totalmem()));
    files(proj, { namespace: 'default' });
    removePod();
  });
  return steps;
}

/**
 * The floor's set-up of one pod of P2's shared shape (pod-latency.bench.ts --shape=shared) under
 * `root`: the configMap on the node's disk (kubelet wraps a disk emptyDir) with
 * `configData` as its files, the downwardAPI on a tmpfs with the bench pods'
 * one label. No teardown steps: P2 measures set-up.
 */
export function sharedShapeSteps(root: string, uid: string, configData: Record<string, string>): FloorStep[] {
  const steps: FloorStep[] = [];
  const { emptyDir, files } = podSteps(steps, root, uid);
  files(emptyDir('kubernetes.io~configmap', 'cfg'), configData);
  files(emptyDir('kubernetes.io~downward-api', 'podinfo', String(totalmem())), { labels: 'app="bench"' });
  return steps;
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** The steps of one phase as a bash script, one command per step (writes with the printf builtin). */
export function shellScript(steps: FloorStep[], phase: 'setup' | 'teardown'): string {
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
      case 'write':
        out.push(`printf '%s' ${q(s.detail)} > ${q(s.path)}`);
        break;
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
    }
  }
  return out.join('\n');
}

/** One step that is not a mount or an umount, as one synchronous syscall (rm: a recursive removal). */
export function fsStep(s: FloorStep): void {
  switch (s.action) {
    case 'mkdir':
      mkdirSync(s.path, { recursive: true, mode: Number.parseInt(s.detail, 8) });
      break;
    case 'chmod':
      chmodSync(s.path, Number.parseInt(s.detail, 8));
      break;
    case 'write':
      writeFileSync(s.path, s.detail, { mode: 0o644 });
      break;
    case 'symlink':
      symlinkSync(s.detail, s.path);
      break;
    case 'rename':
      renameSync(s.path, s.detail);
      break;
    case 'rm':
      rmSync(s.path, { recursive: true, force: true });
      break;
    case 'mount':
    case 'umount':
      throw new Error(`${s.action} is not a filesystem step`);
  }
}

/** mount(8)'s or umount(8)'s arguments for a step. */
export const mountArgs = (s: FloorStep): string[] =>
  s.action === 'mount' ? [...s.detail.split(' '), s.path] : [s.path];

/** The steps of one phase as synchronous syscalls; only mount and umount spawn. Returns ms. */
export function bareLoop(steps: FloorStep[], phase: 'setup' | 'teardown'): number {
  const t0 = performance.now();
  for (const s of steps) {
    if (s.phase !== phase) continue;
    if (s.action === 'mount' || s.action === 'umount') {
      const r = spawnSync(s.action, mountArgs(s), { stdio: 'ignore', timeout: 60_000 });
      if (r.status !== 0) throw new Error(`${s.action} ${mountArgs(s).join(' ')} failed`);
    } else fsStep(s);
  }
  return performance.now() - t0;
}

/**
 * A pod directory as a sorted list of `path type mode [link target]` lines, the
 * atomic writer's timestamp made constant: what the floor and podvol must agree on.
 */
export function podTree(podDir: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const r = `${rel}/${name.startsWith('..2') ? TS : name}`;
      const st = lstatSync(p);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out.push(`${r} link ${readlinkSync(p).replace(/^\.\.2[^/]*/, TS)}`);
      else if (st.isDirectory()) {
        out.push(`${r} dir ${mode}`);
        walk(p, r);
      } else out.push(`${r} file ${mode} ${st.size}`);
    }
  };
  walk(podDir, '');
  return out.sort();
}

/** Throws, naming the differences, unless the floor's pod directory is podvol's (the floor must reach the same end state). */
export function sameEndState(floorPod: string, podvolPod: string): void {
  const a = podTree(floorPod);
  const b = podTree(podvolPod);
  const onlyFloor = a.filter((x) => !b.includes(x));
  const onlyPodvol = b.filter((x) => !a.includes(x));
  if (onlyFloor.length > 0 || onlyPodvol.length > 0)
    throw new Error(
      `the floor does not reach podvol's end state: only in the floor: ${onlyFloor.join('; ') || 'nothing'}; only in podvol's: ${onlyPodvol.join('; ') || 'nothing'}`,
    );
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
