// hostPath type checks and *OrCreate on the host, as kubelet's checkType does
// them (Go's os.MkdirAll and os.OpenFile semantics included).
import assert from 'node:assert/strict';
import { lstat, mkdir, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkHostPathType } from '../../src/plugins/hostpath.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { VolumeError } from '../../src/volumehost/volume.ts';
import { tempDir } from '../helpers/mountns.ts';

const missing = async (p: string) =>
  assert.equal(
    await lstat(p).then(
      () => false,
      () => true,
    ),
    true,
    `${p} must not exist`,
  );

test('DirectoryOrCreate on a dangling symlink succeeds and creates nothing (kubelet: MkdirAll sees it exist)', async (t) => {
  const dir = await tempDir(t);
  const link = join(dir, 'link');
  await symlink(join(dir, 'target'), link);
  await checkHostPathType(link, 'DirectoryOrCreate', nodeFsOps());
  assert.ok((await lstat(link)).isSymbolicLink(), 'the link is left as it is');
  assert.equal(await readlink(link), join(dir, 'target'));
  await missing(join(dir, 'target'));
});

test('DirectoryOrCreate below a dangling symlink succeeds the same way', async (t) => {
  const dir = await tempDir(t);
  await symlink(join(dir, 'target'), join(dir, 'link'));
  await checkHostPathType(join(dir, 'link', 'sub', 'deeper'), 'DirectoryOrCreate', nodeFsOps());
  await missing(join(dir, 'target'));
});

test('DirectoryOrCreate creates missing directories 0755 and accepts an existing one', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'a', 'b');
  await checkHostPathType(path, 'DirectoryOrCreate', nodeFsOps());
  const st = await stat(path);
  assert.ok(st.isDirectory());
  assert.equal(st.mode & 0o777 & ~process.umask(), 0o755 & ~process.umask());
  await checkHostPathType(path, 'DirectoryOrCreate', nodeFsOps());
  await checkHostPathType(path, 'Directory', nodeFsOps());
});

test('DirectoryOrCreate through a regular file fails as Go words it', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'file'), '');
  await assert.rejects(checkHostPathType(join(dir, 'file', 'x'), 'DirectoryOrCreate', nodeFsOps()), (err) => {
    assert.ok(err instanceof VolumeError);
    assert.equal(err.message, `mkdir ${join(dir, 'file')}: not a directory`);
    return true;
  });
});

test('FileOrCreate on a dangling symlink creates the file it points to (O_CREAT follows the link)', async (t) => {
  const dir = await tempDir(t);
  const link = join(dir, 'link');
  await symlink(join(dir, 'target'), link);
  await checkHostPathType(link, 'FileOrCreate', nodeFsOps());
  assert.ok((await stat(join(dir, 'target'))).isFile());
  await checkHostPathType(link, 'File', nodeFsOps());
});

test('type checks: kubelet messages', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'd'));
  const message = async (path: string, type: string) =>
    checkHostPathType(path, type, nodeFsOps()).then(
      () => '',
      (err: Error) => err.message,
    );
  assert.equal(await message(join(dir, 'nope'), 'Directory'), `hostPath ${join(dir, 'nope')} doesn't exist`);
  assert.equal(
    await message(join(dir, 'd'), 'File'),
    `hostPath type check failed: ${join(dir, 'd')} is not a file, it's a Directory`,
  );
  assert.equal(await message(join(dir, 'd'), 'Sideways'), 'Sideways is an invalid volume type');
});
