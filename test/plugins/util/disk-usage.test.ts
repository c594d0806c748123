// du -x as kubelet's fs.DiskUsage counts: allocated blocks, hard links once,
// symlinks not followed, nothing below another mount.
import assert from 'node:assert/strict';
import { link, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { diskUsage } from '../../../src/plugins/util/disk-usage.ts';
import { nodeFsOps } from '../../../src/volumehost/fs.ts';
import { createSafeFs } from '../../../src/volumehost/safe-fs.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { scratchDir, sh } from '../../mount/helpers.ts';

const hostFs = createSafeFs(nodeFsOps());

test('hard links count once; a symlink is counted as a link, never followed', async (t) => {
  const dir = await tempDir(t);
  const vol = join(dir, 'vol');
  await mkdir(join(vol, 'sub'), { recursive: true });
  await writeFile(join(vol, 'sub', 'a'), Buffer.alloc(256 * 1024, 1));
  const before = await diskUsage(hostFs, vol);
  await link(join(vol, 'sub', 'a'), join(vol, 'hard'));
  await writeFile(join(dir, 'outside'), Buffer.alloc(1024 * 1024, 1));
  await symlink(join(dir, 'outside'), join(vol, 'out'));
  await symlink(dir, join(vol, 'up'));
  const after = await diskUsage(hostFs, vol);
  assert.ok(before.bytes >= 256n * 1024n, String(before.bytes));
  assert.ok(after.bytes - before.bytes < 64n * 1024n, `${before.bytes} -> ${after.bytes}`);
  assert.equal(after.inodes, before.inodes + 2, 'two symlinks; the hard link is the same inode');
});

mountTest('a filesystem mounted below the volume is not counted', async (t) => {
  const dir = await scratchDir(t);
  const inner = join(dir, 'inner');
  await mkdir(inner);
  sh('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', inner]);
  await writeFile(join(inner, 'big'), Buffer.alloc(2 * 1024 * 1024, 1));
  const usage = await diskUsage(hostFs, dir);
  assert.ok(usage.bytes < 1024n * 1024n, String(usage.bytes));
});
