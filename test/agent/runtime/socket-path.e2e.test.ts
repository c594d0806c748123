// Who owns --runtime-socket: a podvol takes the path only when nobody serves
// it (a stale socket is replaced, a live one or a non-socket is refused with
// one line), and removes it on exit only while it is still its own socket.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { lstat, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { callRuntime } from '../../../src/agent/runtime/client.ts';
import { daemonDirs, runtimeSocketOf, startPodvol } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { runCli } from '../ops/cli.ts';

/** `podvol run` on `root` with `socket` as its runtime socket, to its exit. */
const runOn = (root: string, manifests: string, socket: string) =>
  runCli([
    'run',
    '--root-dir',
    root,
    '--pod-manifest-path',
    manifests,
    '--listen',
    '127.0.0.1:0',
    '--node-name',
    'testnode',
    '--runtime-socket',
    socket,
  ]);

const listPods = async (socket: string) => (await callRuntime(socket, 'GET', '/v1/pods', 60_000)).status;

mountTest("a second podvol on another root refuses the first one's runtime socket", async (t) => {
  const a = await daemonDirs(await tempDir(t));
  const first = await startPodvol({ rootDir: a.root, manifests: a.manifests });
  t.after(() => first.stop('SIGKILL'));
  const socket = runtimeSocketOf(a.root);
  const before = await lstat(socket, { bigint: true });

  const b = await daemonDirs(await tempDir(t));
  const second = await runOn(b.root, b.manifests, socket);
  assert.equal(second.code, 1);
  assert.equal(
    second.stderr,
    `podvol: runtime socket ${socket} is served by another podvol; stop it first (or give this one another --runtime-socket)\n`,
  );
  // The first one's socket is the same file, and it still answers.
  const after = await lstat(socket, { bigint: true });
  assert.deepEqual([after.dev, after.ino], [before.dev, before.ino]);
  assert.equal(await listPods(socket), 200);
  assert.equal(await first.stop(), 0);
});

mountTest(
  'a stale runtime socket is replaced; a file that is not a socket is refused and kept',
  async (t) => {
    const { root, manifests } = await daemonDirs(await tempDir(t));
    const socket = runtimeSocketOf(root);
    await mkdir(join(root, '..', 'run'), { mode: 0o700 });
    // What a podvol killed with SIGKILL leaves: a socket file nobody listens on.
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [
        '-e',
        `require('node:net').createServer().listen(${JSON.stringify(socket)}, () => process.exit(0))`,
      ]);
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
    });
    assert.ok((await lstat(socket)).isSocket());
    await assert.rejects(callRuntime(socket, 'GET', '/v1/pods', 10_000), /ECONNREFUSED/);

    const p = await startPodvol({ rootDir: root, manifests });
    assert.equal(await listPods(socket), 200);
    assert.equal(await p.stop(), 0);
    await assert.rejects(lstat(socket), { code: 'ENOENT' });

    await writeFile(socket, 'not a socket\n');
    const refused = await runOn(root, manifests, socket);
    assert.equal(refused.code, 1);
    assert.equal(refused.stderr, `podvol: ${socket} exists and is not a socket; refusing to replace it\n`);
    assert.equal(await readFile(socket, 'utf8'), 'not a socket\n');
  },
);

mountTest('a podvol whose runtime socket path was taken over leaves the new socket at exit', async (t) => {
  const { root, manifests } = await daemonDirs(await tempDir(t));
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop('SIGKILL'));
  const socket = runtimeSocketOf(root);
  // Someone else's socket at the path now (an operator's rm, another server).
  await unlink(socket);
  const other = createServer((c) => c.end());
  await new Promise<void>((resolve) => other.listen(socket, resolve));
  t.after(() => new Promise((resolve) => other.close(resolve)));
  const theirs = await lstat(socket, { bigint: true });

  assert.equal(await p.stop(), 0);
  const after = await lstat(socket, { bigint: true });
  assert.deepEqual([after.dev, after.ino], [theirs.dev, theirs.ino]);
  assert.ok(
    p.logLines().some((l) => l.msg === 'runtime socket path holds another socket now; left in place'),
    p.output(),
  );
});
