// --host-root: hostPaths resolved under the host's / as if chrooted there.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkHostPathType } from '../../src/plugins/hostpath.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { resolveInRoot } from '../../src/volumehost/hostroot.ts';

async function hostTree(t: import('node:test').TestContext) {
  const root = await mkdtemp(join(tmpdir(), 'podvol-hostroot-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'run/app'), { recursive: true });
  await mkdir(join(root, 'var'), { recursive: true });
  await writeFile(join(root, 'run/app/sock'), '');
  await symlink('/run', join(root, 'var/run')); // absolute: the host's /run
  await symlink('../../../../../../etc', join(root, 'var/up')); // climbs: clamped at the host root
  await symlink('loop2', join(root, 'var/loop1'));
  await symlink('loop1', join(root, 'var/loop2'));
  return root;
}

test('absolute and climbing symlinks stay under the host root', async (t) => {
  const root = await hostTree(t);
  assert.equal(await resolveInRoot(root, '/var/run/app/sock', nodeFsOps()), join(root, 'run/app/sock'));
  assert.equal(await resolveInRoot(root, '/var/up/passwd', nodeFsOps()), join(root, 'etc/passwd'));
  assert.equal(await resolveInRoot(root, '/../../var/run', nodeFsOps()), join(root, 'run'));
  assert.equal(
    await resolveInRoot(root, '/var/new/dir', nodeFsOps()),
    join(root, 'var/new/dir'),
    'missing parts as written',
  );
  assert.equal(await resolveInRoot('/', '/var/run', nodeFsOps()), '/var/run', "'/' changes nothing");
  await assert.rejects(resolveInRoot(root, '/var/loop1/x', nodeFsOps()), { code: 'ELOOP' });
});

test('DirectoryOrCreate creates on the host side, never through a symlink out of it', async (t) => {
  const root = await hostTree(t);
  const onHost = await resolveInRoot(root, '/var/up/podvol-made', nodeFsOps());
  await checkHostPathType(onHost, 'DirectoryOrCreate', nodeFsOps());
  assert.ok((await stat(join(root, 'etc/podvol-made'))).isDirectory());
  await assert.rejects(stat('/etc/podvol-made'), { code: 'ENOENT' });
});
