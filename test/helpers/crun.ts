// Real containers for the runtime-contract tests: an OCI bundle whose rootfs
// is a static busybox, the mounts `podvol mounts` printed, run by Debian's
// crun (installed by scripts/test.ts). State, bundle and rootfs live in the
// test's temp dir; cgroups are not managed (--cgroup-manager=disabled).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { copyFile, mkdir, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';

export interface OciMount {
  destination: string;
  type: string;
  source: string;
  options?: string[];
}

export interface ContainerSpec {
  args: string[];
  mounts: OciMount[];
  uid?: number;
  gid?: number;
  additionalGids?: number[];
}

export function crunAvailable(): string | undefined {
  if (spawnSync('crun', ['--version'], { stdio: 'ignore' }).error) return 'crun is not installed';
  if (spawnSync('/bin/busybox', ['true'], { stdio: 'ignore' }).status !== 0)
    return 'busybox is not installed';
  return undefined;
}

const CGROUP2_MAGIC = 0x63677270;
const TMPFS_MAGIC = 0x01021994;

/**
 * crun refuses a hybrid cgroup layout (cgroup2 at /sys/fs/cgroup/unified with
 * controllers) even when it manages no cgroups. Inside the tests' private
 * mount namespace an empty tmpfs hides the unified hierarchy from it.
 */
export async function hideHybridCgroups(t: TestContext): Promise<void> {
  try {
    const top = await statfs('/sys/fs/cgroup');
    const unified = await statfs('/sys/fs/cgroup/unified');
    if (Number(top.type) !== TMPFS_MAGIC || Number(unified.type) !== CGROUP2_MAGIC) return;
  } catch {
    return;
  }
  const r = spawnSync('mount', [
    '-t',
    'tmpfs',
    '-o',
    'size=4k',
    'podvol-test-cgroup',
    '/sys/fs/cgroup/unified',
  ]);
  if (r.status !== 0) throw new Error(`cannot hide the hybrid cgroup hierarchy: ${r.stderr}`);
  t.after(() => {
    spawnSync('umount', ['/sys/fs/cgroup/unified']);
  });
}

let seq = 0;

async function bundle(dir: string, spec: ContainerSpec): Promise<string> {
  const b = join(dir, `bundle-${process.pid}-${++seq}`);
  await mkdir(join(b, 'rootfs', 'bin'), { recursive: true });
  await copyFile('/bin/busybox', join(b, 'rootfs', 'bin', 'busybox'));
  const config = {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: spec.uid ?? 0, gid: spec.gid ?? 0, additionalGids: spec.additionalGids ?? [] },
      args: ['/bin/busybox', ...spec.args],
      env: ['PATH=/bin'],
      cwd: '/',
      noNewPrivileges: true,
    },
    root: { path: 'rootfs', readonly: true },
    hostname: 'podvol-test',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'mode=755', 'size=1m'] },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'size=1m'] },
      // podvol's mounts, unchanged.
      ...spec.mounts,
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'mount' }, { type: 'ipc' }, { type: 'uts' }],
      maskedPaths: ['/proc/kcore'],
    },
  };
  await writeFile(join(b, 'config.json'), JSON.stringify(config, null, 2));
  return b;
}

function crunArgs(dir: string, b: string, id: string): string[] {
  return ['--root', join(dir, 'crun-state'), '--cgroup-manager=disabled', 'run', '--bundle', b, id];
}

/** Runs a container to completion; resolves with its exit code and output. */
export async function runContainer(
  dir: string,
  spec: ContainerSpec,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const b = await bundle(dir, spec);
  const id = `podvol-test-${process.pid}-${seq}`;
  return new Promise((resolve, reject) => {
    const child = spawn('crun', crunArgs(dir, b, id), { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface RunningContainer {
  output(): string;
  stop(): Promise<void>;
}

/** Starts a long-running container; stop() kills and deletes it. */
export async function startContainer(dir: string, spec: ContainerSpec): Promise<RunningContainer> {
  const b = await bundle(dir, spec);
  const id = `podvol-test-${process.pid}-${seq}`;
  const child: ChildProcess = spawn('crun', crunArgs(dir, b, id), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (d) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('close', () => r()));
  return {
    output: () => out,
    async stop() {
      spawnSync('crun', ['--root', join(dir, 'crun-state'), 'kill', id, 'KILL']);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      spawnSync('crun', ['--root', join(dir, 'crun-state'), 'delete', '--force', id]);
    },
  };
}
