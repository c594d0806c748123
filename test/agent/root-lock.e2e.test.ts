// One podvol per root directory: a second `podvol run` (or a drain) on the
// same root exits 1 with one line naming the holder's PID, and the lock goes
// with the holder however it exits.
import assert from 'node:assert/strict';
import { symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { lockRootDir, RootDirLockedError } from '../../src/agent/root-lock.ts';
import { daemonDirs, startPodvol } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { runCli } from './ops/cli.ts';

mountTest("a second podvol run on the same root directory exits 1 naming the first one's PID", async (t) => {
  const base = await tempDir(t);
  const { root, manifests } = await daemonDirs(base);
  const first = await startPodvol({ rootDir: root, manifests });
  t.after(() => first.stop('SIGKILL'));
  // The same directory through a symlink is the same lock.
  const alias = join(base, 'alias');
  await symlink(root, alias);
  for (const dir of [root, alias]) {
    const second = await runCli([
      'run',
      '--root-dir',
      dir,
      '--pod-manifest-path',
      manifests,
      '--listen',
      '127.0.0.1:0',
      '--node-name',
      'testnode',
    ]);
    assert.equal(second.code, 1);
    assert.equal(
      second.stderr,
      `podvol: root directory ${dir} is in use by another podvol (pid ${first.proc.pid}, podvol run); stop it first\n`,
    );
  }
  // Killed without a chance to clean up: the kernel drops the lock with the process.
  assert.equal(await first.stop('SIGKILL'), null);
  const again = await startPodvol({ rootDir: root, manifests });
  assert.equal(await again.stop(), 0);
});

test('the lock is per directory and released on release()', async (t) => {
  const a = await tempDir(t);
  const b = await tempDir(t);
  const lockA = await lockRootDir(a, 'drain');
  const lockB = await lockRootDir(b, 'drain');
  await assert.rejects(lockRootDir(a, 'run'), (err: unknown) => {
    assert.ok(err instanceof RootDirLockedError);
    assert.equal(err.holder.pid, process.pid);
    assert.equal(err.holder.command, 'drain');
    return true;
  });
  await lockA.release();
  const relocked = await lockRootDir(a, 'run');
  await relocked.release();
  await lockB.release();
});
