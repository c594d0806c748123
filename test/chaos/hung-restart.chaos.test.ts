// Chaos: podvol restarts over a volume whose own mount does not answer
// (issue 15). A pod's emptyDir gets a real FUSE filesystem (bindfs) mounted
// on it (what a CSI driver serving a FUSE filesystem leaves at a volume's
// path), podvol is stopped, the FUSE daemon is stopped (SIGSTOP), and podvol
// starts again with a second pod. Reconstruction finds the hung volume among
// the others: start, /readyz and the other pod must not wait on it; the hung
// volume reports FilesystemUnresponsive and is retried without a new stat
// process per retry; /healthz answers throughout; removing the pod tears the
// hung mount down with force; SIGTERM ends podvol at once.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type PodvolProcess, startPodvol, volumeOf, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountedAt, mountPointsAtOrBelow } from '../helpers/mounts.ts';
import { figure, pct } from './lib.ts';

const hasBindfs = () => !spawnSync('bindfs', ['--version'], { stdio: 'ignore' }).error;

const pod = (name: string, uid: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, uid },
    spec: {
      containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'work', mountPath: '/w' }] }],
      volumes: [{ name: 'work', emptyDir: {} }],
    },
  });

/** podvol's own `stat` children whose last argument is at or below `path`. */
async function statChildren(pid: number | undefined, path: string): Promise<number> {
  let n = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = await readFile(`/proc/${entry}/status`, 'utf8');
      if (/^PPid:\s*(\d+)$/m.exec(status)?.[1] !== String(pid)) continue;
      const argv = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0').filter(Boolean);
      if (argv[0] === 'stat' && (argv.at(-1) ?? '').startsWith(path)) n++;
    } catch {}
  }
  return n;
}

mountTest('chaos: a restart over a hung volume does not hold start, /readyz or the other pods', async (t) => {
  if (!hasBindfs()) {
    if (process.env.CI === 'true')
      assert.fail('bindfs is not installed (scripts/test.ts installs it as root)');
    return t.skip('bindfs is not installed');
  }
  let fuse: ChildProcess | undefined;
  let p: PodvolProcess | undefined;
  let base = '';
  t.after(async () => {
    await p?.stop('SIGKILL');
    fuse?.kill('SIGCONT');
    fuse?.kill('SIGKILL');
    for (const mp of mountPointsAtOrBelow(base)) spawnSync('umount', ['-l', '-c', mp], { timeout: 10_000 });
  });
  base = await tempDir(t);
  const root = join(base, 'root');
  const manifests = join(base, 'manifests');
  const src = join(base, 'src');
  await Promise.all([mkdir(manifests), mkdir(src)]);
  await writeFile(join(manifests, 'hung.json'), pod('hung', 'chaos-hung-restart'));
  // The same start without a hung volume, for comparison (loading the daemon takes seconds on a busy machine).
  const n0 = performance.now();
  p = await startPodvol({ rootDir: root, manifests });
  const normalProc = p;
  await waitFor('/readyz', async () => (await normalProc.get('/readyz')).status === 200, 120_000);
  const normalReadyMs = performance.now() - n0;
  const first = p;
  const work = await waitFor(
    'the emptyDir mounted',
    async () => {
      const v = await volumeOf(first, 'chaos-hung-restart', 'work');
      return v?.state === 'mounted' ? v : undefined;
    },
    90_000,
  );
  assert.equal(await p.stop('SIGTERM'), 0);
  p = undefined;

  // The volume's own mount is now a FUSE filesystem, and its daemon stops answering.
  fuse = spawn('bindfs', ['-f', src, work.path], { stdio: 'ignore' });
  await waitFor('bindfs on the volume', () => mountedAt(work.path), 60_000);
  fuse.kill('SIGSTOP');
  await writeFile(join(manifests, 'other.json'), pod('other', 'chaos-other'));

  const t0 = performance.now();
  p = await startPodvol({ rootDir: root, manifests });
  const proc = p;
  await waitFor('/readyz', async () => (await proc.get('/readyz')).status === 200, 120_000);
  const readyMs = performance.now() - t0;
  const health: number[] = [];
  let healthFailures = 0;
  const prober = setInterval(async () => {
    const h0 = performance.now();
    const ok = (await proc.get('/healthz').catch(() => ({ status: 0 }))).status === 200;
    if (ok) health.push(performance.now() - h0);
    else healthFailures++;
  }, 250);
  t.after(() => clearInterval(prober));
  await waitFor(
    'the other pod mounted',
    async () => (await volumeOf(proc, 'chaos-other', 'work'))?.state === 'mounted',
    120_000,
  );
  const otherMs = performance.now() - t0;
  // The hung volume says why, and is retried (several attempts) with at most one stat in flight.
  const hung = await waitFor(
    'the hung volume to report FilesystemUnresponsive, retried',
    async () => {
      const v = await volumeOf(proc, 'chaos-hung-restart', 'work');
      return v?.reason === 'FilesystemUnresponsive' && v.attempts >= 3 ? v : undefined;
    },
    180_000,
  );
  assert.match(hung.message, /no answer within/);
  const children = await statChildren(proc.proc.pid, work.path);
  assert.ok(children <= 1, `${children} stat processes in flight for one hung path`);

  // The pod goes: its hung mount is unmounted with force, the volume torn down.
  const d0 = performance.now();
  await rm(join(manifests, 'hung.json'));
  await waitGone('the hung pod directory', join(root, 'pods', 'chaos-hung-restart'), 180_000);
  const teardownMs = performance.now() - d0;
  clearInterval(prober);
  const s0 = performance.now();
  const out = proc.output;
  assert.equal(await proc.stop('SIGTERM'), 0, out().slice(-3000));
  const stopMs = performance.now() - s0;
  p = undefined;

  figure(t, 'hung restart: start to /readyz, no hung volume', `${normalReadyMs.toFixed(0)} ms`);
  figure(t, 'hung restart: start to /readyz, over the hung volume', `${readyMs.toFixed(0)} ms`);
  figure(t, 'hung restart: start to the other pod mounted', `${otherMs.toFixed(0)} ms`);
  figure(t, 'hung restart: stat processes in flight for the hung path', children);
  figure(t, 'hung restart: /healthz', pct(health));
  figure(t, 'hung restart: /healthz failures', healthFailures);
  figure(t, 'hung restart: teardown of the hung volume', `${teardownMs.toFixed(0)} ms`);
  figure(t, 'hung restart: SIGTERM to exit', `${stopMs.toFixed(0)} ms`);
  assert.equal(healthFailures, 0);
});
