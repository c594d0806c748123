// Chaos: a filesystem whose server stops answering (issue 15). A real FUSE
// filesystem (bindfs) has its daemon stopped with SIGSTOP, under a hostPath
// and mounted inside a pod's emptyDir (what a container may do). Asserted: the
// hostPath volume fails with FilesystemUnresponsive instead of hanging its
// operation; other pods are still set up; /healthz answers 200 throughout; the
// emptyDir's teardown unmounts the hung filesystem with force and finishes;
// SIGTERM stops podvol at once. The hung pod has as many hostPath volumes on
// the hung filesystem as the pool has slots, so an operation that kept its
// slot while it waits on its deadline would leave other pods none (issue 20).
// Figures: other pods' mount latency with the hung filesystem against the same
// pods without it (goal: within 1.5x).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type PodvolProcess, startPodvol, waitFor, waitGone } from '../helpers/daemon.ts';
import { median } from '../helpers/figures.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountedAt, mountPointsAtOrBelow } from '../helpers/mounts.ts';
import { at } from '../helpers/must.ts';
import { staticPod, type VolumeSpec } from '../helpers/pods.ts';
import { figure, pct, size } from './lib.ts';

const hasBindfs = () => !spawnSync('bindfs', ['--version'], { stdio: 'ignore' }).error;

/** bindfs in the foreground (the child is the daemon), mounted at `dir`. */
async function bindfs(src: string, dir: string): Promise<ChildProcess> {
  const child = spawn('bindfs', ['-f', src, dir], { stdio: 'ignore' });
  await waitFor(`bindfs at ${dir}`, () => mountedAt(dir), 60_000);
  return child;
}

/**
 * Whether a stat of `path` gets no answer within a second (the daemon is really
 * stopped). Never waited for: a request the daemon had read before it stopped
 * blocks the stat uninterruptibly, even against SIGKILL, until the FUSE
 * connection goes (the daemon's death in the clean-up ends it).
 */
const hangs = (path: string) =>
  new Promise<boolean>((resolve) => {
    const child = spawn('stat', ['--', path], { stdio: 'ignore' });
    const timer = setTimeout(() => resolve(true), 1000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });

/** How many processes have `path` as an argument (the daemon's stat probes of it). */
function processesOn(paths: readonly string[]): number {
  let n = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => paths.includes(a))) n++;
    } catch {
      // Gone meanwhile.
    }
  }
  return n;
}

const pod = (name: string, volumes: VolumeSpec[]) => JSON.stringify(staticPod(name, volumes));

const healthy = (name: string) =>
  pod(name, [
    { name: 'e', emptyDir: { medium: 'Memory' } },
    { name: 'd', downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
  ]);

mountTest('chaos: a hung FUSE filesystem fails only its volume; teardown and shutdown finish', async (t) => {
  if (!hasBindfs()) {
    if (process.env.CI === 'true')
      assert.fail('bindfs is not installed (scripts/test.ts installs it as root)');
    return t.skip('bindfs is not installed');
  }
  const samples = size(3, 15);
  /** The pool's size, pinned so that the hung pod's volumes fill it on any machine. */
  const pool = 4;
  const daemons: ChildProcess[] = [];
  let p: PodvolProcess | undefined;
  let base = '';
  // Registered before tempDir's removal: podvol stops, the FUSE daemons resume
  // and die, and what they served is detached without a stat (-c).
  t.after(async () => {
    await p?.stop('SIGKILL');
    for (const d of daemons) {
      d.kill('SIGCONT');
      d.kill('SIGKILL');
    }
    for (const mp of mountPointsAtOrBelow(base)) spawnSync('umount', ['-l', '-c', mp], { timeout: 10_000 });
  });
  base = await tempDir(t);
  const root = join(base, 'root');
  const manifests = join(base, 'manifests');
  const src = join(base, 'src');
  const fuse = join(base, 'fuse');
  await Promise.all([mkdir(manifests), mkdir(join(src, 'data'), { recursive: true }), mkdir(fuse)]);
  daemons.push(await bindfs(src, fuse));

  await writeFile(join(manifests, 'scratch.json'), pod('scratch', [{ name: 'work', emptyDir: {} }]));
  p = await startPodvol({ rootDir: root, manifests, extra: ['--max-concurrent-operations', String(pool)] });
  const proc = p;
  const volumes = async (podName: string) =>
    (await proc.status()).pods.find((x) => x.name === `${podName}-testnode`)?.volumes ?? [];
  const allMounted = async (podName: string, n: number) => {
    const v = await volumes(podName);
    return v.length === n && v.every((x) => x.state === 'mounted');
  };
  // Other pods' latency: from the manifest to every volume mounted, one pod at a time.
  const latency = async (prefix: string): Promise<number[]> => {
    const ms: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      await writeFile(join(manifests, `${prefix}-${i}.json`), healthy(`${prefix}-${i}`));
      await waitFor(`${prefix}-${i} mounted`, () => allMounted(`${prefix}-${i}`, 2), 90_000);
      ms.push(performance.now() - t0);
    }
    return ms;
  };
  const health: number[] = [];
  let healthFailures = 0;
  const probe = async () => {
    const h0 = performance.now();
    const ok = (await proc.get('/healthz').catch(() => ({ status: 0 }))).status === 200;
    if (ok) health.push(performance.now() - h0);
    else healthFailures++;
  };

  await waitFor('the emptyDir mounted', () => allMounted('scratch', 1), 90_000);
  const normal = await latency('before');
  const work = at(await volumes('scratch'), 0, 'the scratch volume');
  // What a container might do: a FUSE filesystem of its own inside the emptyDir.
  const inner = join(work.path, 'inner');
  await mkdir(inner);
  daemons.push(await bindfs(src, inner));

  for (const d of daemons) d.kill('SIGSTOP');
  await waitFor(
    'the FUSE filesystems to stop answering',
    async () => (await hangs(join(fuse, 'data'))) && (await hangs(inner)),
    60_000,
  );
  const prober = setInterval(() => void probe(), 250);
  t.after(() => clearInterval(prober));

  // hostPaths on the hung filesystem (names never looked up, so no cache answers), one per pool slot.
  const hungPaths = Array.from({ length: pool }, (_, i) => join(fuse, 'data', `x${i}`));
  await writeFile(
    join(manifests, 'hung.json'),
    pod(
      'hung',
      hungPaths.map((path, i) => ({ name: `h${i}`, hostPath: { path, type: 'DirectoryOrCreate' as const } })),
    ),
  );
  // Measured once every one of its operations waits on its probe (a `stat` child per path, 5 s deadline).
  await waitFor('the hung pod probing each of its hostPaths', () => processesOn(hungPaths) === pool, 60_000);
  const withHung = await latency('during');
  const hung = await waitFor(
    'the hostPath volumes to fail',
    async () => {
      const v = await volumes('hung');
      return v.length === pool && v.every((x) => x.state === 'failed') ? v : undefined;
    },
    90_000,
  );
  for (const v of hung) {
    assert.equal(v.reason, 'FilesystemUnresponsive', v.message);
    assert.match(v.message ?? '', /no answer within 5000 ms/);
  }

  // Teardown of the emptyDir with the hung filesystem inside: unmounted with force, then removed.
  const t0 = performance.now();
  await rm(join(manifests, 'scratch.json'));
  await waitGone('the emptyDir torn down', work.path, 120_000);
  const teardownMs = performance.now() - t0;
  assert.equal(await mountedAt(inner), false);
  await waitFor('the force unmount in the log', () =>
    proc.logLines().some((l) => l.msg === 'unresponsive filesystem unmounted' && l.mountPoint === inner),
  );
  clearInterval(prober);
  await probe();

  // The hostPath's operation is still retried with backoff; stopping does not wait on the filesystem.
  const s0 = performance.now();
  const out = p.output;
  assert.equal(await p.stop('SIGTERM'), 0, out().slice(-3000));
  const stopMs = performance.now() - s0;
  p = undefined;

  figure(t, 'hung filesystem: other pods mount latency, normal', pct(normal));
  figure(t, 'hung filesystem: other pods mount latency, with a hung FUSE filesystem', pct(withHung));
  figure(
    t,
    'hung filesystem: latency ratio p50 (goal <= 1.5)',
    (median(withHung) / median(normal)).toFixed(2),
  );
  // The first pod after the hung pod's probes started is the one a held slot would delay most.
  figure(t, 'hung filesystem: latency ratio max', (Math.max(...withHung) / Math.max(...normal)).toFixed(2));
  figure(t, 'hung filesystem: /healthz while hung', pct(health));
  figure(t, 'hung filesystem: /healthz failures', healthFailures);
  figure(t, 'hung filesystem: teardown of the emptyDir holding it', `${teardownMs.toFixed(0)} ms`);
  figure(t, 'hung filesystem: SIGTERM to exit', `${stopMs.toFixed(0)} ms`);
  assert.equal(healthFailures, 0);
  assert.equal(withHung.length, samples);
});
