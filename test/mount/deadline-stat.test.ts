import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { statWithDeadline, unresponsiveMounts } from '../../src/mount/deadline-stat.ts';
import type { CommandRunner, RunRequest } from '../../src/mount/exec.ts';
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
