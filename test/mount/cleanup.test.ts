// mount-utils' CleanupMountPoint and CleanupMountWithForce as one free function
// over mount.Interface: it unmounts, then removes, and refuses what mount-utils
// refuses. Driven through the fake mounter on a real temporary directory; the
// Linux mounter's own runs are in linux.test.ts and linux-simulated.test.ts.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { type CleanupFs, cleanupMountPoint, cleanupMountWithForce } from '../../src/mount/cleanup.ts';
import { FakeMounter } from '../helpers/fake-mounter.ts';

async function volumeDir(t: TestContext): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'podvol-cleanup-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const dir = join(root, 'vol');
  await mkdir(dir);
  return dir;
}

const gone = async (path: string) => (await stat(path).catch(() => undefined)) === undefined;

/** A file system whose stat fails with `code`; removals are recorded. */
function failingStat(code: string): CleanupFs & { removed: string[] } {
  const removed: string[] = [];
  return {
    removed,
    stat: async (p) => Promise.reject(Object.assign(new Error(`${code}: ${p}`), { code })),
    access: async () => {},
    rmdir: async (p) => {
      removed.push(p);
    },
    unlink: async (p) => {
      removed.push(p);
    },
  };
}

describe('cleanupMountPoint', () => {
  test('unmounts a mount point, then removes the directory', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await m.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    await cleanupMountPoint(dir, m, true);
    assert.equal(m.isMounted(dir), false);
    assert.ok(await gone(dir));
    assert.deepEqual(
      m.calls.slice(1).map((c) => c.method),
      ['isMountPoint', 'unmount', 'isMountPoint'],
      'asked, unmounted, asked again',
    );
  });

  test('unmounts stacked mounts one by one', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await m.mount('tmpfs', dir, 'tmpfs', []);
    await m.mount('tmpfs', dir, 'tmpfs', []);
    await cleanupMountPoint(dir, m, false);
    assert.equal(m.callsOf('unmount').length, 2);
    assert.ok(await gone(dir));
  });

  test('removes a directory that is no mount point without unmounting', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await cleanupMountPoint(dir, m, false);
    assert.equal(m.callsOf('unmount').length, 0);
    assert.ok(await gone(dir));
  });

  test('removes the file a file bind mount was on', async (t) => {
    const dir = await volumeDir(t);
    const file = join(dir, 'f');
    await writeFile(file, '');
    const m = new FakeMounter();
    await m.mount(dir, file, '', ['bind']);
    await cleanupMountPoint(file, m, true);
    assert.ok(await gone(file));
  });

  test('a missing path is success and asks the mounter nothing', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await cleanupMountPoint(join(dir, 'nope'), m, true);
    assert.deepEqual(m.calls, []);
  });

  test('a corrupted mount (stat fails with ENOTCONN) is unmounted without asking, then removed', async () => {
    const m = new FakeMounter({ useFileSystem: false });
    await m.mount('srv:/e', '/nfs', 'nfs', ['vers=4']);
    const fs = failingStat('ENOTCONN');
    await cleanupMountPoint('/nfs', m, false, { fs });
    assert.deepEqual(
      m.calls.slice(1).map((c) => c.method),
      ['unmount', 'isLikelyNotMountPoint'],
    );
    assert.deepEqual(fs.removed, ['/nfs']);
  });

  test('refuses a path it cannot probe (stat fails with ELOOP, no corrupted-mount errno), touching nothing', async () => {
    const m = new FakeMounter({ useFileSystem: false });
    await m.mount('tmpfs', '/x', 'tmpfs', []);
    const fs = failingStat('ELOOP');
    await assert.rejects(cleanupMountPoint('/x', m, true, { fs }), { code: 'ELOOP' });
    assert.equal(m.isMounted('/x'), true);
    assert.deepEqual(fs.removed, []);
  });

  test('refuses to remove a directory that is not empty (os.Remove), after unmounting', async (t) => {
    const dir = await volumeDir(t);
    await writeFile(join(dir, 'data'), 'keep');
    const m = new FakeMounter();
    await m.mount('tmpfs', dir, 'tmpfs', []);
    await assert.rejects(cleanupMountPoint(dir, m, true), { code: 'ENOTEMPTY' });
    assert.equal(m.isMounted(dir), false);
    assert.equal(await gone(join(dir, 'data')), false, 'nothing of what was under the mount is deleted');
  });

  test('refuses a path still mounted after unmounting, leaving the directory', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    for (let i = 0; i < 17; i++) await m.mount('tmpfs', dir, 'tmpfs', []);
    await assert.rejects(cleanupMountPoint(dir, m, true), /still mounted after 16 unmounts/);
    assert.equal(m.isMounted(dir), true);
    assert.equal(await gone(dir), false);
  });

  test('an unmount that fails is the cleanup failing, the directory left', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await m.mount('tmpfs', dir, 'tmpfs', []);
    m.injectError(dir, new Error('target is busy'), ['unmount']);
    await assert.rejects(cleanupMountPoint(dir, m, true), /target is busy/);
    assert.equal(await gone(dir), false);
  });
});

describe('cleanupMountWithForce', () => {
  test('unmounts with unmountWithForce and its deadline, then removes', async (t) => {
    const dir = await volumeDir(t);
    const m = new FakeMounter();
    await m.mount('srv:/e', dir, 'nfs', ['vers=4']);
    await cleanupMountWithForce(dir, m, true, 5000);
    assert.deepEqual(m.callsOf('unmountWithForce'), [
      { method: 'unmountWithForce', target: dir, timeoutMs: 5000 },
    ]);
    assert.equal(m.callsOf('unmount').length, 0);
    assert.ok(await gone(dir));
  });
});
