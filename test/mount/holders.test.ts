// A busy unmount names who holds the mount: working directories, open and
// mapped files, and other mount namespaces that still have the filesystem.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { MountError } from '../../src/mount/errors.ts';
import { findMountHolders, formatHolders } from '../../src/mount/holders.ts';
import { createLinuxMounter } from '../../src/mount/linux.ts';
import { waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { must } from '../helpers/must.ts';

/** `file` running until the test ends (or kill()): its pid. */
function hold(t: TestContext, file: string, args: string[], cwd?: string): { pid: number; kill(): void } {
  const child = spawn(file, args, { cwd, stdio: 'ignore' });
  const kill = () => {
    child.kill('SIGKILL');
  };
  t.after(kill);
  return { pid: must(child.pid, `the pid of ${file}`), kill };
}

mountTest('a busy unmount fails with EBUSY and names every holder found in /proc', async (t) => {
  const dir = await tempDir(t);
  const target = join(dir, 'vol');
  await mkdir(target);
  const mounter = createLinuxMounter({ systemd: 'off' });
  await mounter.mount('tmpfs', target, 'tmpfs', ['size=1m']);
  await writeFile(join(target, 'data'), 'x');
  await mkdir(join(target, 'sub'));
  const inCwd = hold(t, 'sleep', ['1000'], join(target, 'sub'));
  const withFile = hold(t, 'tail', ['-f', join(target, 'data')]);
  // A mount namespace made while the volume is mounted keeps its own copy of it.
  const otherNs = hold(t, 'unshare', ['--mount', '--propagation', 'private', 'sleep', '1000']);
  await waitFor('the holders to be in place', async () => {
    const found = await findMountHolders(target);
    const pids = found.map((h) => h.pid);
    return [inCwd.pid, withFile.pid, otherNs.pid].every((p) => pids.includes(p)) && found;
  });

  const err = await mounter.unmount(target).then(
    () => assert.fail('unmount of a busy target succeeded'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof MountError);
  assert.equal(err.code, 'EBUSY');
  const byPid = new Map(err.holders.map((h) => [h.pid, h]));
  assert.deepEqual(byPid.get(inCwd.pid), { pid: inCwd.pid, command: 'sleep', holds: ['cwd'] });
  assert.deepEqual(byPid.get(withFile.pid), {
    pid: withFile.pid,
    command: 'tail',
    holds: [`open file ${join(target, 'data')}`],
  });
  // unshare execs sleep in the new namespace.
  assert.deepEqual(byPid.get(otherNs.pid)?.holds, ['mount namespace']);
  assert.ok(err.message.includes(`pid ${inCwd.pid} (sleep): cwd`), err.message);
  assert.ok(err.message.includes(formatHolders(err.holders)), err.message);
  assert.match(err.message, /^unmount failed: .*target is busy, held by pid /);

  // Once the holders are gone the same unmount works.
  for (const c of [inCwd, withFile]) c.kill();
  await waitFor('the holders to exit', async () => {
    const pids = (await findMountHolders(target)).map((h) => h.pid);
    return !pids.includes(inCwd.pid) && !pids.includes(withFile.pid);
  });
  assert.equal(await mounter.unmount(target), 'unmounted');
  // Nothing holds a path that is not mounted.
  assert.deepEqual(await findMountHolders(target), []);
});
