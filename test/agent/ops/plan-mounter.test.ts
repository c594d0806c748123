// `podvol plan`'s recording mounter: the Linux mounter's checks on the plan's
// recording filesystem, every change reported as a step, the table and the
// filesystem kept in step, and nothing done to the host.
import assert from 'node:assert/strict';
import { mkdir, readdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { createPlanFs, type PlanFs } from '../../../src/agent/ops/plan-fs.ts';
import { createPlanMounter, type MountStep } from '../../../src/agent/ops/plan-mounter.ts';
import { readMountInfo } from '../../../src/mount/mountinfo.ts';
import { UnsafeTargetError } from '../../../src/mount/target.ts';
import { tempDir } from '../../helpers/mountns.ts';

async function planMounter() {
  const steps: MountStep[] = [];
  const mounter = createPlanMounter({
    mounts: await readMountInfo(),
    fs: () => fs,
    record: (s) => steps.push(s),
  });
  const fs: PlanFs = createPlanFs({ mounts: () => mounter.table(), record: () => {} });
  return { mounter, fs, steps };
}

test('a mount and an unmount are steps, change the table and the recording fs, and leave the host alone', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'vol'));
  const { mounter, fs, steps } = await planMounter();
  assert.equal(await mounter.isMountPoint(join(dir, 'vol')), false);
  await mounter.mount('tmpfs', join(dir, 'vol'), 'tmpfs', ['size=1m'], { withoutSystemd: true });
  assert.deepEqual(steps, [{ action: 'mount', path: join(dir, 'vol'), detail: '-t tmpfs -o size=1m tmpfs' }]);
  assert.equal(await mounter.isMountPoint(join(dir, 'vol')), true);
  assert.equal(await mounter.isLikelyNotMountPoint(join(dir, 'vol')), false);
  assert.equal((await mounter.list()).at(-1)?.fsType, 'tmpfs');
  // The recording fs sees the new filesystem: its root has tmpfs's mode.
  assert.equal((await fs.stat(join(dir, 'vol'))).mode & 0o7777, 0o1777);
  assert.equal(await mounter.unmount(join(dir, 'vol')), 'unmounted');
  assert.equal(await mounter.unmount(join(dir, 'vol')), 'not-mounted', 'once');
  assert.deepEqual(steps.at(-1), { action: 'umount', path: join(dir, 'vol') });
  assert.equal(steps.length, 2);
  assert.equal(
    (await readMountInfo()).some((m) => m.mountPoint === join(dir, 'vol')),
    false,
    'nothing mounted on the host',
  );
});

test('a target the Linux mounter refuses is refused: a symlink, a symlink on the way, a missing one, bad options', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'real/vol'), { recursive: true });
  await symlink(join(dir, 'real/vol'), join(dir, 'link'));
  await symlink(join(dir, 'real'), join(dir, 'via'));
  const { mounter, steps } = await planMounter();
  const call = { withoutSystemd: true };
  await assert.rejects(mounter.mount('tmpfs', join(dir, 'link'), 'tmpfs', [], call), UnsafeTargetError);
  await assert.rejects(mounter.mount('tmpfs', join(dir, 'via/vol'), 'tmpfs', [], call), UnsafeTargetError);
  await assert.rejects(
    mounter.mount('tmpfs', join(dir, 'missing'), 'tmpfs', [], call),
    (err: Error) => !(err instanceof UnsafeTargetError) && /missing/.test(err.message),
  );
  await assert.rejects(mounter.mount('tmpfs', join(dir, 'real/vol'), 'tmpfs', ['a,b'], call));
  assert.deepEqual(steps, [], 'nothing refused is reported as done');
  assert.deepEqual((await readdir(join(dir, 'real/vol'))).length, 0);
});
