// A podvol that cannot start closes what it had opened and exits 1 with one
// line; SIGTERM ends podvol while it is still starting, however long that is.
import assert from 'node:assert/strict';
import { lstat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { daemonDirs, runtimeSocketOf, spawnPodvol, waitFor } from '../helpers/daemon.ts';
import { listenLocal } from '../helpers/listen.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { fuseAvailable, mountDaemonlessFuse } from '../mount/helpers.ts';
import { runCli } from './ops/cli.ts';

mountTest('a podvol whose --listen port is taken exits 1 with one line and leaves no socket', async (t) => {
  const { root, manifests } = await daemonDirs(await tempDir(t));
  const holder = createServer();
  const port = await listenLocal(holder);
  t.after(() => new Promise((resolve) => holder.close(resolve)));
  const socket = runtimeSocketOf(root);
  const r = await runCli([
    'run',
    '--root-dir',
    root,
    '--pod-manifest-path',
    manifests,
    '--listen',
    `127.0.0.1:${port}`,
    '--node-name',
    'testnode',
    '--runtime-socket',
    socket,
  ]);
  assert.equal(r.code, 1, `exit code (null: it did not exit by itself)\n${r.stderr}`);
  assert.equal(
    r.stderr,
    `podvol: cannot listen on 127.0.0.1:${port}: address already in use (another podvol? see --listen)\n`,
  );
  await assert.rejects(lstat(socket), { code: 'ENOENT' }, 'the runtime socket it had opened is gone');
});

mountTest('SIGTERM ends a podvol whose start-up hangs on its manifest directory', async (t) => {
  if (!fuseAvailable()) return t.skip('no /dev/fuse');
  const { root, manifests } = await daemonDirs(await tempDir(t));
  // A filesystem that never answers (a dead NFS server): the first scan of the static pods hangs.
  mountDaemonlessFuse(t, manifests);
  const p = await spawnPodvol({ rootDir: root, manifests });
  t.after(() => p.stop('SIGKILL'));
  // The HTTP endpoints answer before the pod sources start: start-up is past them and stuck.
  await waitFor('podvol to listen', async () => (await p.get('/healthz')).status === 200, 90_000);
  assert.ok(!p.logLines().some((l) => l.msg === 'podvol started'), 'start-up has not finished');
  p.proc.kill('SIGTERM');
  // Bounded only so that a podvol that ignores SIGTERM fails the test instead of hanging it.
  const ended = await waitFor(
    'podvol to exit on SIGTERM',
    // Its output read to the end too: the exit can be seen before the last lines are.
    () =>
      (p.proc.exitCode === null && p.proc.signalCode === null) || !p.proc.stdout?.readableEnded
        ? undefined
        : p.proc,
    60_000,
  ).catch((err) => assert.fail(`${err.message}\n${p.output()}`));
  // The scan stuck in the kernel holds a thread Node's exit would wait for: it dies of the signal.
  assert.equal(ended.signalCode, 'SIGTERM', p.output());
  await assert.rejects(lstat(runtimeSocketOf(root)), { code: 'ENOENT' });
});
