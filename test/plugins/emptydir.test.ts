// kubernetes.io/empty-dir with the fake mounter on a temp directory, as
// kubelet's emptydir_test.go: what is created, what is mounted with which
// options, what TearDown undoes.
import assert from 'node:assert/strict';
import { lstat, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { tmpfsNoswapSupported } from '../../src/mount/probe.ts';
import { podWith } from '../helpers/pods.ts';
import { pluginHarness } from './harness.ts';

const volumeDir = (root: string, name: string) =>
  join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~empty-dir', name);
const readyFile = (root: string, name: string) =>
  join(root, 'pods', 'uid-1', 'plugins', 'kubernetes.io~empty-dir', name, 'ready');

test('default medium: a 0777 directory and a ready marker outside it, nothing mounted; TearDown removes both', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'scratch', emptyDir: {} }]);
  await (await h.mounterFor(pod, 'scratch')).setUp({});
  const dir = volumeDir(h.root, 'scratch');
  assert.equal((await stat(dir)).mode & 0o7777, 0o777);
  assert.ok((await stat(readyFile(h.root, 'scratch'))).isFile());
  assert.deepEqual(h.mounter.callsOf('mount'), []);
  await h.unmounterFor(pod, 'scratch').tearDown();
  await assert.rejects(lstat(dir), { code: 'ENOENT' });
  await assert.rejects(lstat(readyFile(h.root, 'scratch')), { code: 'ENOENT' });
  assert.deepEqual(h.mounter.callsOf('unmount'), []);
});

test('medium Memory: a tmpfs sized by sizeLimit, mounted once however often SetUp runs, unmounted by TearDown', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'fast', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }]);
  const m = await h.mounterFor(pod, 'fast');
  await m.setUp({});
  await m.setUp({});
  const dir = volumeDir(h.root, 'fast');
  const options = ['size=67108864', ...((await tmpfsNoswapSupported()) ? ['noswap'] : [])];
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => [c.source, c.target, c.fstype, c.options]),
    [['tmpfs', dir, 'tmpfs', options]],
  );
  await h.unmounterFor(pod, 'fast').tearDown();
  assert.deepEqual(
    h.mounter.callsOf('unmount').map((c) => c.target),
    [dir],
  );
  assert.equal(h.mounter.isMounted(dir), false);
  await assert.rejects(lstat(dir), { code: 'ENOENT' });
});

test('medium Memory without sizeLimit: the pod memory limit, else node allocatable', async (t) => {
  const h = await pluginHarness(t);
  const limited = podWith([{ name: 'a', emptyDir: { medium: 'Memory' } }]);
  limited.spec?.containers.forEach((c) => {
    c.resources = { limits: { memory: '128Mi' } };
  });
  await (await h.mounterFor(limited, 'a')).setUp({});
  const unlimited = podWith([{ name: 'b', emptyDir: { medium: 'Memory' } }]);
  await (await h.mounterFor(unlimited, 'b')).setUp({});
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => c.options[0]),
    ['size=134217728', `size=${1024 ** 3}`],
  );
});

test('medium HugePages-2Mi: hugetlbfs with the requested page size; without a request nothing is mounted', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'huge', emptyDir: { medium: 'HugePages-2Mi' } }]);
  pod.spec?.containers.forEach((c) => {
    c.resources = { requests: { 'hugepages-2Mi': '4Mi' }, limits: { 'hugepages-2Mi': '4Mi' } };
  });
  await (await h.mounterFor(pod, 'huge')).setUp({});
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => [c.source, c.fstype, c.options]),
    [['nodev', 'hugetlbfs', ['pagesize=2Mi']]],
  );
  const none = podWith([{ name: 'huge', emptyDir: { medium: 'HugePages' } }]);
  none.metadata = { ...none.metadata, uid: 'uid-2' };
  await assert.rejects((await h.mounterFor(none, 'huge')).setUp({}), { reason: 'HugePagesNotRequested' });
  assert.equal(h.mounter.callsOf('mount').length, 1);
});

test('an unknown medium fails with UnknownStorageMedium and writes no ready marker', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'ssd', emptyDir: { medium: 'SSD' } }]);
  await assert.rejects((await h.mounterFor(pod, 'ssd')).setUp({}), {
    reason: 'UnknownStorageMedium',
    message: 'unknown storage medium "SSD"',
  });
  await assert.rejects(lstat(readyFile(h.root, 'ssd')), { code: 'ENOENT' });
  assert.deepEqual(h.mounter.callsOf('mount'), []);
});

test('fsGroup: the volume gets the group, group rw and setgid, whatever the medium', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'shared', emptyDir: {} }]);
  await (await h.mounterFor(pod, 'shared')).setUp({ fsGroup: process.getgid?.() ?? 0 });
  const st = await stat(volumeDir(h.root, 'shared'));
  assert.equal(st.mode & 0o7777, 0o2777);
  assert.equal(st.gid, process.getgid?.() ?? 0);
});

test('a symlink planted where the volume goes is refused, not followed', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([{ name: 'x', emptyDir: {} }]);
  await (await h.mounterFor(pod, 'x')).setUp({});
  const parent = join(h.root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~empty-dir');
  const { symlink, rm } = await import('node:fs/promises');
  await rm(join(parent, 'x'), { recursive: true });
  await rm(join(parent, '..', '..', 'plugins'), { recursive: true });
  await symlink(h.root, join(parent, 'x'));
  await assert.rejects((await h.mounterFor(pod, 'x')).setUp({}), { reason: 'UnsafePath' });
  assert.deepEqual((await readdir(h.root)).sort(), ['pods']);
});
