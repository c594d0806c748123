// kubelet's CleanSubPaths, from open directories: the subpath bind mounts are
// unmounted and their empty targets removed; a symlink planted anywhere in
// volume-subpaths is unlinked, never followed; nothing else is deleted, even
// while a process keeps swapping entries for symlinks to somewhere outside.
import assert from 'node:assert/strict';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { LinuxMounter } from '../../src/mount/linux.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { createSafeFs } from '../../src/volumehost/safe-fs.ts';
import { createSubPather, SUBPATH_DIR } from '../../src/volumehost/subpath.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { isBelow, mountTable } from '../helpers/mounts.ts';
import { precious, startSwapper } from '../helpers/swapper.ts';

const below = (dir: string) => mountTable().filter((m) => isBelow(m.mountPoint, dir));

async function setup(t: import('node:test').TestContext) {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  const intact = await precious(outside);
  const volume = join(root, 'pods/p1/volumes/kubernetes.io~empty-dir/data');
  await mkdir(join(volume, 'logs'), { recursive: true });
  await writeFile(join(volume, 'logs/app.log'), 'kept');
  await writeFile(join(volume, 'conf'), 'kept too');
  const subPaths = createSubPather({
    rootDir: root,
    mounter: new LinuxMounter({ systemd: 'off' }),
    fs: createSafeFs(nodeFsOps()),
    logger: pino({ level: 'silent' }),
  });
  const req = { podUID: 'p1', volumeName: 'data', volumePath: volume, containerName: 'app' };
  const dirTarget = await subPaths.prepare({ ...req, index: 0, subPath: 'logs' });
  const fileTarget = await subPaths.prepare({ ...req, index: 1, subPath: 'conf' });
  const podDir = join(root, 'pods/p1');
  assert.equal(readFileSync(join(dirTarget, 'app.log'), 'utf8'), 'kept');
  assert.equal(readFileSync(fileTarget, 'utf8'), 'kept too');
  assert.equal(below(join(podDir, SUBPATH_DIR)).length, 2);
  return { root, outside, intact, volume, podDir, subPaths };
}

mountTest(
  'CleanSubPaths unmounts the subpath bind mounts and unlinks planted symlinks without following them',
  async (t) => {
    const { outside, intact, volume, podDir, subPaths } = await setup(t);
    const vdir = join(podDir, SUBPATH_DIR, 'data');
    // Links where podvol keeps an index, a container directory and a volume directory.
    await symlink(outside, join(vdir, 'app', '7'));
    await symlink(join(outside, 'f0'), join(vdir, 'app', '8'));
    await symlink(outside, join(vdir, 'evil'));
    await symlink(outside, join(podDir, SUBPATH_DIR, 'other'));

    await subPaths.cleanSubPaths('p1', 'data');
    assert.deepEqual(below(podDir), [], 'no subpath mount left');
    assert.equal(existsSync(vdir), false);
    assert.ok(intact(), 'nothing outside was deleted');
    // The volume itself is untouched: the subpath content stays in it.
    assert.equal(readFileSync(join(volume, 'logs/app.log'), 'utf8'), 'kept');
    assert.equal(readFileSync(join(volume, 'conf'), 'utf8'), 'kept too');

    // A volume directory that is a link is unlinked as a link; the pod's directory goes with the last one.
    await subPaths.cleanSubPaths('p1', 'other');
    assert.ok(intact());
    assert.ok(lstatSync(outside).isDirectory());
    assert.equal(existsSync(join(podDir, SUBPATH_DIR)), false);
    // Nothing left to do is success.
    await subPaths.cleanSubPaths('p1', 'data');
  },
);

mountTest(
  'CleanSubPaths never deletes what it did not create: a non-empty directory is an error, the rest is cleaned',
  async (t) => {
    const { podDir, subPaths } = await setup(t);
    const stray = join(podDir, SUBPATH_DIR, 'data', 'app', '5');
    await mkdir(stray);
    await writeFile(join(stray, 'precious'), 'x');
    await assert.rejects(
      subPaths.cleanSubPaths('p1', 'data'),
      /error cleaning subpath mount .*\/5: .*ENOTEMPTY/,
    );
    assert.deepEqual(below(podDir), [], 'both subpath mounts were still unmounted');
    assert.equal(readFileSync(join(stray, 'precious'), 'utf8'), 'x');
  },
);

mountTest(
  'a process swapping entries for symlinks during CleanSubPaths never gets anything outside deleted',
  async (t) => {
    const { root, outside, intact, podDir, subPaths } = await setup(t);
    const containerDir = join(podDir, SUBPATH_DIR, 'data', 'app');
    const swapper = startSwapper(t, containerDir, outside);
    const iterations = Number(process.env.PODVOL_RACE_ITERATIONS ?? 20);
    for (let i = 0; i < iterations; i++) {
      await subPaths.cleanSubPaths('p1', 'data').catch(() => {
        // The swapper refills directories (ENOTEMPTY) or swaps them mid-way: a clean refusal.
      });
      assert.ok(intact(), `iteration ${i}: a file outside was deleted`);
    }
    const exited = new Promise((r) => swapper.once('exit', r));
    swapper.kill('SIGKILL');
    if (swapper.exitCode === null && swapper.signalCode === null) await exited;
    await subPaths.cleanSubPaths('p1', 'data').catch(() => {
      // What the swapper left (directories with its files in them) is not podvol's to delete.
    });
    assert.deepEqual(below(root), [], 'the subpath mounts were unmounted');
    assert.ok(intact());
    assert.ok(lstatSync(outside).isDirectory());
  },
);
