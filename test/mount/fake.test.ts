import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { MountError, MountOptionError } from '../../src/mount/errors.ts';
import type * as mount from '../../src/mount/types.ts';
import { FakeMounter } from '../helpers/fake-mounter.ts';
import { at } from '../helpers/must.ts';

async function tmp(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'podvol-fake-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('FakeMounter', () => {
  test('is a mount.Interface that records calls and keeps a mount table', async () => {
    const m: mount.Interface = new FakeMounter({ useFileSystem: false });
    const fake = m as FakeMounter;
    await m.mount('tmpfs', '/pods/a/vol', 'tmpfs', ['size=1m', 'nosuid'], {
      sensitiveOptions: ['mode=0700'],
    });
    assert.equal(await m.isMountPoint('/pods/a/vol'), true);
    assert.equal(await m.isLikelyNotMountPoint('/pods/a/vol'), false);
    const entry = at(await m.list(), 0);
    assert.equal(entry.fsType, 'tmpfs');
    assert.deepEqual(entry.mountOptions, ['rw', 'nosuid']);
    assert.ok(!entry.superOptions.includes('mode=0700'), 'sensitive options are not kept in the table');
    assert.deepEqual(at(fake.callsOf('mount'), 0).sensitiveOptions, ['mode=0700']);

    assert.equal(await m.unmount('/pods/a/vol'), 'unmounted');
    assert.equal(await m.unmount('/pods/a/vol'), 'not-mounted');
    assert.deepEqual(
      fake.calls.map((c) => c.method),
      ['mount', 'isMountPoint', 'isLikelyNotMountPoint', 'list', 'unmount', 'unmount'],
    );
  });

  test('validates options like the real mounter', async () => {
    const m = new FakeMounter({ useFileSystem: false });
    await assert.rejects(m.mount('tmpfs', '/x', 'tmpfs', ['size=1m,exec']), MountOptionError);
    assert.equal(m.isMounted('/x'), false);
  });

  test('bind mounts share the root of their source, so getMountRefs finds them', async () => {
    const m = new FakeMounter({ useFileSystem: false, mounts: [{ mountPoint: '/', major: 8, minor: 1 }] });
    await m.mount('/data/vol', '/pods/a/vol', '', ['bind']);
    await m.mount('/data/vol', '/pods/b/vol', '', ['bind', 'ro']);
    assert.deepEqual(await m.getMountRefs('/pods/a/vol'), ['/pods/b/vol']);
    assert.deepEqual(await m.getMountRefs('/data/vol'), ['/pods/a/vol', '/pods/b/vol']);
    assert.deepEqual((await m.list()).at(-1)?.mountOptions, ['ro']);
  });

  test('injected errors fail the chosen calls on a target until cleared', async () => {
    const m = new FakeMounter({ useFileSystem: false });
    const boom = new MountError({
      operation: 'mount',
      command: 'mount',
      args: [],
      output: 'boom',
      timedOut: false,
      reason: 'exit status 32',
    });
    m.injectError('/x', boom, ['mount']);
    await assert.rejects(m.mount('tmpfs', '/x', 'tmpfs', []), MountError);
    assert.equal(await m.unmount('/x'), 'not-mounted');
    m.clearError('/x');
    await m.mount('tmpfs', '/x', 'tmpfs', []);
    assert.equal(m.callsOf('mount').length, 2);
  });

  test('unmountWithForce reports the outcome it was told to', async () => {
    const m = new FakeMounter({ useFileSystem: false });
    await m.mount('srv:/e', '/nfs', 'nfs', ['vers=4']);
    m.setUnmountOutcome('/nfs', 'lazy');
    assert.equal(await m.unmountWithForce('/nfs', 1000), 'lazy');
    assert.deepEqual(m.callsOf('unmountWithForce'), [
      { method: 'unmountWithForce', target: '/nfs', timeoutMs: 1000 },
    ]);
  });

  test('on the real file system: a missing path is ENOENT, and no mount point, no mount', async (t) => {
    const root = await tmp(t);
    const m = new FakeMounter();
    await assert.rejects(m.isLikelyNotMountPoint(join(root, 'nope')), { code: 'ENOENT' });
    await assert.rejects(m.mount('tmpfs', join(root, 'nope'), 'tmpfs', []), /mount point does not exist/);
  });
});
