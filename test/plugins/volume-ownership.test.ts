// SetVolumeOwnership as kubelet's volume_linux.go: the recursive walk, and
// fsGroupChangePolicy OnRootMismatch skipping it when the root is already right.
import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { requiresPermissionChange, setVolumeOwnership } from '../../src/plugins/volume-ownership.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { createSafeFs } from '../../src/volumehost/safe-fs.ts';
import { tempDir } from '../helpers/mountns.ts';

const hostFs = createSafeFs(nodeFsOps());
/** setVolumeOwnership of the directory `dir`, opened as a plugin opens its volume. */
async function ownership(dir: string, gid: number, opts: Parameters<typeof setVolumeOwnership>[2]) {
  const root = await hostFs.openRoot(dir);
  try {
    return await setVolumeOwnership(root, gid, opts);
  } finally {
    await root.close();
  }
}

const asRoot = process.getuid?.() === 0;
const rootTest = (name: string, fn: (t: TestContext) => Promise<void>) =>
  test(name, { skip: asRoot ? false : 'chown to another group needs root' }, fn);

const GID = 4321;

async function tree(t: TestContext) {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'sub'));
  await writeFile(join(dir, 'sub', 'file'), 'x', { mode: 0o600 });
  await writeFile(join(dir, 'top'), 'y', { mode: 0o644 });
  await symlink('top', join(dir, 'link'));
  await chmod(dir, 0o755);
  return dir;
}

rootTest(
  'a walk gives every entry the group, group rw, and setgid+x on directories; links only the group',
  async (t) => {
    const dir = await tree(t);
    await chmod(join(dir, 'top'), 0o400);
    const r = await ownership(dir, GID, { readOnly: false });
    assert.deepEqual(r, { skipped: false, files: 5 });
    assert.equal((await stat(join(dir, 'sub', 'file'))).mode & 0o7777, 0o660);
    assert.equal(
      (await stat(join(dir, 'top'))).mode & 0o7777,
      0o660,
      'the symlink did not re-chmod its target',
    );
    assert.equal((await stat(join(dir, 'sub'))).mode & 0o7777, 0o2775);
    assert.equal((await stat(dir)).mode & 0o7777, 0o2775);
    for (const p of ['sub', 'sub/file', 'top', '']) assert.equal((await stat(join(dir, p))).gid, GID, p);
    assert.equal((await lstat(join(dir, 'link'))).gid, GID);
  },
);

rootTest('read-only volumes get group read only', async (t) => {
  const dir = await tree(t);
  await ownership(dir, GID, { readOnly: true });
  assert.equal((await stat(join(dir, 'sub', 'file'))).mode & 0o7777, 0o640);
  assert.equal((await stat(dir)).mode & 0o7777, 0o2755);
});

rootTest('OnRootMismatch: a root with the group, the bits and setgid is not walked', async (t) => {
  const dir = await tree(t);
  await chown(dir, 0, GID);
  await chmod(dir, 0o2770);
  assert.equal(await requiresPermissionChange(dir, GID, false, nodeFsOps()), false);
  const r = await ownership(dir, GID, { readOnly: false, fsGroupChangePolicy: 'OnRootMismatch' });
  assert.deepEqual(r, { skipped: true, files: 0 });
  const file = await stat(join(dir, 'sub', 'file'));
  assert.notEqual(file.gid, GID, 'nothing below the root was touched');
  assert.equal(file.mode & 0o7777, 0o600);
});

rootTest('OnRootMismatch walks when the group, a bit or setgid is missing at the root', async (t) => {
  for (const [gid, mode] of [
    [0, 0o2770],
    [GID, 0o770],
    [GID, 0o2750],
  ] as const) {
    const dir = await tree(t);
    await chown(dir, 0, gid);
    await chmod(dir, mode);
    assert.equal(
      await requiresPermissionChange(dir, GID, false, nodeFsOps()),
      true,
      `gid ${gid} mode ${mode.toString(8)}`,
    );
    const r = await ownership(dir, GID, { readOnly: false, fsGroupChangePolicy: 'OnRootMismatch' });
    assert.equal(r.skipped, false);
    assert.equal((await stat(join(dir, 'sub', 'file'))).gid, GID);
  }
});

rootTest('Always (or no policy) walks even a matching root', async (t) => {
  const dir = await tree(t);
  await chown(dir, 0, GID);
  await chmod(dir, 0o2770);
  for (const policy of ['Always', undefined]) {
    const r = await ownership(dir, GID, { readOnly: false, fsGroupChangePolicy: policy });
    assert.equal(r.skipped, false);
  }
  assert.equal((await stat(join(dir, 'sub', 'file'))).gid, GID);
});

test('a read-only root needs only group read and exec', async (t) => {
  const dir = await tempDir(t);
  const gid = (await stat(dir)).gid;
  await chmod(dir, 0o2550);
  assert.equal(await requiresPermissionChange(dir, gid, true, nodeFsOps()), false);
  assert.equal(await requiresPermissionChange(dir, gid, false, nodeFsOps()), true);
  assert.equal(await requiresPermissionChange(join(dir, 'missing'), gid, true, nodeFsOps()), true);
});
