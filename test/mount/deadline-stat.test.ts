import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { StatProbe, statWithDeadline, unresponsiveMounts } from '../../src/mount/deadline-stat.ts';
import type { CommandRunner, RunRequest, RunResult } from '../../src/mount/exec.ts';
import type { MountInfo } from '../../src/mount/types.ts';

test('statWithDeadline: real stat(1) gives the type, follows links when asked, and names the errno', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'podvol-dstat-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'f'), 'x');
  await symlink(dir, join(dir, 'link'));
  assert.deepEqual(await statWithDeadline(dir), { state: 'ok', type: 'Directory' });
  assert.deepEqual(await statWithDeadline(join(dir, 'f')), { state: 'ok', type: 'File' });
  assert.deepEqual(await statWithDeadline(join(dir, 'link')), { state: 'ok', type: 'Symlink' });
  assert.deepEqual(await statWithDeadline(join(dir, 'link'), { follow: true }), {
    state: 'ok',
    type: 'Directory',
  });
  const missing = await statWithDeadline(join(dir, 'no:such'));
  assert.equal(missing.state, 'error');
  assert.equal(missing.state === 'error' && missing.code, 'ENOENT');
  const notDir = await statWithDeadline(join(dir, 'f', 'x'));
  assert.equal(notDir.state === 'error' && notDir.code, 'ENOTDIR');
});

test('a stat that outlives its deadline is timed-out, with the path and the deadline in the message', async () => {
  const runner: CommandRunner = async () => ({
    exitCode: undefined,
    signal: 'SIGTERM',
    output: '',
    timedOut: true,
    spawnErrorCode: undefined,
  });
  const r = await statWithDeadline('/hung/x', { runner, timeoutMs: 1234 });
  assert.equal(r.state, 'timed-out');
  assert.match(r.state === 'timed-out' ? r.message : '', /^stat \/hung\/x: no answer within 1234 ms/);
});

test('unresponsiveMounts probes only served filesystems at or below the path, deepest first', async () => {
  const calls: RunRequest[] = [];
  const hung = new Set(['/v/a/fuse', '/v']);
  const runner: CommandRunner = async (req) => {
    calls.push(req);
    const path = req.args.at(-1) ?? '';
    return hung.has(path)
      ? { exitCode: undefined, signal: 'SIGTERM', output: '', timedOut: true, spawnErrorCode: undefined }
      : { exitCode: 0, signal: undefined, output: '41ed', timedOut: false, spawnErrorCode: undefined };
  };
  const m = (mountPoint: string, fsType: string) => ({ mountPoint, fsType }) as MountInfo;
  const mounts = [
    m('/v', 'fuse.bindfs'),
    m('/v/a/fuse', 'fuse.sshfs'),
    m('/v/a/ok', 'nfs4'),
    m('/v/tmp', 'tmpfs'),
    m('/vx', 'fuse.bindfs'),
    m('/other', 'nfs'),
  ];
  const out = await unresponsiveMounts(mounts, '/v', { runner, timeoutMs: 10 });
  assert.deepEqual(
    out.map((x) => x.mountPoint),
    ['/v/a/fuse', '/v'],
  );
  // tmpfs, and mounts beside or outside /v, are never touched.
  assert.deepEqual(calls.map((c) => c.args.at(-1)).sort(), ['/v', '/v/a/fuse', '/v/a/ok']);
  assert.ok(calls.every((c) => c.file === 'stat' && c.timeoutMs === 10 && c.args.includes('--')));
});

test('StatProbe: one child per path at a time; a timed-out probe answers for its path until its child is gone', async () => {
  const calls: string[] = [];
  let exit: () => void = () => {};
  const answers: ((r: RunResult) => void)[] = [];
  const runner: CommandRunner = (req) => {
    calls.push(req.args.join(' '));
    return new Promise<RunResult>((resolve) => answers.push(resolve));
  };
  const probe = new StatProbe({ runner, timeoutMs: 50 });
  // Two callers while the probe runs share it.
  const a = probe.stat('/hung/x', { follow: true });
  const b = probe.stat('/hung/x', { follow: true });
  assert.equal(calls.length, 1);
  // Another path, or the same path without following, is its own probe.
  void probe.stat('/hung/y', { follow: true });
  void probe.stat('/hung/x');
  assert.equal(calls.length, 3);
  const exited = new Promise<void>((resolve) => {
    exit = resolve;
  });
  // The first probe's answer: timed out, its child still alive (stuck in the kernel).
  answers[0]?.({
    exitCode: undefined,
    signal: undefined,
    output: '',
    timedOut: true,
    spawnErrorCode: undefined,
    exited,
  });
  assert.equal((await a).state, 'timed-out');
  assert.equal(await b, await a);
  // Retries while the child lives start nothing and get the timed-out answer.
  assert.equal((await probe.stat('/hung/x', { follow: true })).state, 'timed-out');
  assert.equal(calls.length, 3);
  assert.equal(probe.inFlight(), 3);
  exit();
  await exited;
  await new Promise((r) => setImmediate(r));
  // The child is gone: the next call probes again.
  void probe.stat('/hung/x', { follow: true });
  assert.equal(calls.length, 4);
});

test('StatProbe with real stat(1): types and errors as statWithDeadline, nothing left in flight', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'podvol-dstat-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'f'), 'x');
  const probe = new StatProbe();
  const [d, f, missing] = await Promise.all([
    probe.stat(dir),
    probe.stat(join(dir, 'f'), { follow: true }),
    probe.stat(join(dir, 'nope')),
  ]);
  assert.deepEqual(d, { state: 'ok', type: 'Directory' });
  assert.deepEqual(f, { state: 'ok', type: 'File' });
  assert.equal(missing.state === 'error' && missing.code, 'ENOENT');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(probe.inFlight(), 0);
});
