// Chaos: mount targets swapped for symlinks while podvol mounts on them
// (issue 15). A "container" (test/helpers/swapper.ts) swaps the directories
// of a tree for symlinks to a directory outside, and back, as fast as it can,
// while the real Linux mounter mounts tmpfs on them: on the directories
// themselves (the last component swapped) and on a directory below each (a
// component on the way swapped). Checked after every attempt, from the mount
// table: nothing is mounted outside the tree (a mount may be found where the
// swapper moved its directory afterwards: still the directory asked for). A
// mount lands on what was checked or fails with UnsafePath: the mounter holds
// the target by handle (src/mount/target.ts). Mounting by path (pathTargets), the
// same test found mounts outside in 4 rounds of 40.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdir, rename, rm, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createLinuxMounter } from '../../src/mount/linux.ts';
import { readMountInfo } from '../../src/mount/mountinfo.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { figure, size } from './lib.ts';

/**
 * Keeps each `tree/sub<k>` a symlink to `outside` about half of the time
 * (renamed away, a link in its place, a millisecond, and back), so a mount by
 * path lands outside in some rounds.
 */
function startTargetSwapper(t: TestContext, tree: string, outside: string): ChildProcess {
  const code = `
    const fs = require('node:fs');
    const [tree, outside] = process.argv.slice(1);
    const pause = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} };
    for (let i = 0; ; i++) {
      const d = tree + '/sub' + (i % 4);
      try { fs.renameSync(d, d + '.away'); fs.symlinkSync(outside, d); } catch {}
      pause(1);
      try { fs.unlinkSync(d); fs.renameSync(d + '.away', d); } catch {}
      pause(1);
    }`;
  const child = spawn(process.execPath, ['-e', code, tree, outside], { stdio: 'ignore' });
  t.after(() => {
    child.kill('SIGKILL');
  });
  return child;
}

mountTest('chaos: mount targets swapped for symlinks never get a mount outside', async (t) => {
  const rounds = size(40, 400);
  const base = await tempDir(t);
  const tree = join(base, 'tree');
  const outside = join(base, 'outside');
  await mkdir(join(outside, 'deep'), { recursive: true });
  for (let k = 0; k < 4; k++) await mkdir(join(tree, `sub${k}`, 'deep'), { recursive: true });
  // Our mounts are told apart by their source name.
  const source = `podvol-race-${process.pid}`;
  const ours = async () => (await readMountInfo()).filter((m) => m.source === source);
  const detachAll = async () => {
    for (const m of (await ours()).reverse())
      spawnSync('umount', ['-l', '--no-canonicalize', m.mountPoint], { timeout: 10_000 });
  };
  t.after(detachAll);
  const mounter = createLinuxMounter({ systemd: 'off', commandTimeoutMs: 30_000 });
  const swapper = startTargetSwapper(t, tree, outside);

  let mounted = 0;
  let refused = 0;
  let moved = 0;
  const misplaced: string[] = [];
  for (let i = 0; i < rounds; i++) {
    const k = i % 4;
    // The directory itself, or one below it (then sub<k> on the way is what gets swapped).
    const target = i % 8 < 4 ? join(tree, `sub${k}`) : join(tree, `sub${k}`, 'deep');
    try {
      await mounter.mount(source, target, 'tmpfs', ['size=1m']);
      mounted++;
    } catch (err) {
      refused++;
      assert.match(String(err), /UnsafePath|refusing|mount failed|ENOENT|ENOTDIR|ELOOP/, String(err));
    }
    swapper.kill('SIGSTOP');
    try {
      for (const m of await ours()) {
        // The swapper may move the directory (with the mount on it) after the mount: still the directory asked for.
        if (m.mountPoint !== target && m.mountPoint.startsWith(`${tree}/`)) moved++;
        else if (m.mountPoint !== target) misplaced.push(`${target} -> ${m.mountPoint}`);
      }
      await detachAll();
      // Put the tree back as the swapper leaves it at any instant: directories, no links.
      for (let j = 0; j < 4; j++) {
        const d = join(tree, `sub${j}`);
        await unlink(d).catch(() => {});
        await rename(`${d}.away`, d).catch(() => {});
        await mkdir(join(d, 'deep'), { recursive: true });
      }
    } finally {
      swapper.kill('SIGCONT');
    }
  }
  swapper.kill('SIGKILL');
  figure(t, 'mount target race: rounds', rounds);
  figure(t, 'mount target race: mounted where asked', mounted);
  figure(t, 'mount target race: refused (UnsafePath or the target gone)', refused);
  figure(t, 'mount target race: moved inside the tree with their directory by the swapper', moved);
  figure(t, 'mount target race: mounts outside the tree', misplaced.length);
  assert.deepEqual(misplaced, []);
  assert.ok(mounted > 0, 'no mount ever succeeded: the race test proves nothing');
  // Nothing is left for the temp dir's removal.
  await rm(tree, { recursive: true, force: true });
  await rmdir(join(outside, 'deep'));
});
