import assert from 'node:assert/strict';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { errnoCode } from '../../src/errno.ts';
import { type FsOps, nodeFsOps } from '../../src/volumehost/fs.ts';
import { createSafeFs, relativeBeneath, type SafeFs, UnsafePathError } from '../../src/volumehost/safe-fs.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { precious, startSwapper } from '../helpers/swapper.ts';
import { scratchDir, sh } from '../mount/helpers.ts';

// The host's filesystem, as a VolumeHost hands it to plugins (getFs).
const host = createSafeFs(nodeFsOps());
const {
  mkdirAllBeneath,
  openDirBeneath,
  openPathBeneath,
  removeAllBeneath,
  removeContentsBeneath,
  withDirBeneath,
  withHeldDirs,
} = host;

async function fill(dir: string, files: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (let i = 0; i < files; i++) await writeFile(join(dir, `f${i}`), `precious ${i}`);
}

function countFiles(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) n += countFiles(join(dir, e.name));
    else n++;
  }
  return n;
}

const isUnsafe = (kind: string) => (err: unknown) => err instanceof UnsafePathError && err.kind === kind;

test('mkdirAllBeneath creates missing directories and refuses a symlink component', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  await mkdirAllBeneath(root, 'a/b/c', 0o750);
  assert.equal((await stat(join(root, 'a/b/c'))).mode & 0o777, 0o750);
  await symlink(outside, join(root, 'a/link'));
  await assert.rejects(mkdirAllBeneath(root, 'a/link/x'), isUnsafe('notDirectory'));
  assert.deepEqual(await readdir(outside), [], 'nothing created through the symlink');
  await symlink(join(outside, 'dangling'), join(root, 'a/dangling'));
  await assert.rejects(mkdirAllBeneath(root, 'a/dangling'), isUnsafe('notDirectory'));
  assert.equal(existsSync(join(outside, 'dangling')), false, 'a dangling symlink is not created through');
});

test('paths with .. or absolute paths are refused before anything is touched', async (t) => {
  const root = await tempDir(t);
  for (const bad of ['..', '../x', 'a/../../x', '/etc', 'a/..']) {
    await assert.rejects(mkdirAllBeneath(root, bad), isUnsafe('badPath'), bad);
    await assert.rejects(removeAllBeneath(root, bad), isUnsafe('badPath'), bad);
    await assert.rejects(openDirBeneath(root, bad), isUnsafe('badPath'), bad);
  }
  await assert.rejects(removeAllBeneath(root, ''), isUnsafe('badPath'));
  assert.equal(relativeBeneath('/r/pods', '/r/pods/u/volumes'), 'u/volumes');
  assert.throws(() => relativeBeneath('/r/pods', '/r/podsx/u'), isUnsafe('badPath'));
  assert.throws(() => relativeBeneath('/r/pods', '/r/pods/u/../../etc'), isUnsafe('badPath'));
});

test('openDirBeneath refuses symlinks at every component; the open dir follows renames', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  await mkdir(join(root, 'vol/sub'), { recursive: true });
  await symlink(outside, join(root, 'vol/link'));
  await assert.rejects(openDirBeneath(root, 'vol/link'), isUnsafe('notDirectory'));
  await assert.rejects(openDirBeneath(root, 'vol/link/x'), isUnsafe('notDirectory'));
  await withDirBeneath(root, 'vol/sub', async (dir) => {
    await rename(join(root, 'vol/sub'), join(root, 'vol/moved'));
    await symlink(outside, join(root, 'vol/sub'));
    await writeFile(dir.child('f'), 'x');
  });
  assert.deepEqual(await readdir(outside), [], 'writes went to the directory that was opened');
  assert.equal(readFileSync(join(root, 'vol/moved/f'), 'utf8'), 'x');
  // A SafeDir is a root too; the final component of an O_PATH open is not followed.
  await withDirBeneath(root, 'vol', async (vol) => {
    const fh = await openPathBeneath(vol, 'link');
    try {
      assert.equal((await fh.stat()).isSymbolicLink(), true);
    } finally {
      await fh.close();
    }
  });
});

test('removeAllBeneath removes a tree, unlinks symlinks without following them, and is idempotent', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  await fill(outside, 5);
  await fill(join(root, 'vol/a/b/c'), 3);
  await symlink(outside, join(root, 'vol/a/link-dir'));
  await symlink(join(outside, 'f0'), join(root, 'vol/a/b/link-file'));
  await chmod(join(root, 'vol/a/b'), 0o000); // root ignores permissions, as rm -rf does
  await removeAllBeneath(root, 'vol');
  assert.equal(existsSync(join(root, 'vol')), false);
  assert.equal(countFiles(outside), 5);
  await removeAllBeneath(root, 'vol'); // already gone
  await removeAllBeneath(root, 'missing/parent/vol');
  // The target itself a symlink: the link goes, not what it points to.
  await symlink(outside, join(root, 'vol'));
  await removeAllBeneath(root, 'vol');
  assert.equal(existsSync(join(root, 'vol')), false);
  assert.equal(countFiles(outside), 5);
  // A symlink on the way to the target: refused.
  await mkdir(join(root, 'p'));
  await symlink(outside, join(root, 'p/volumes'));
  await assert.rejects(removeAllBeneath(root, 'p/volumes/f0'), isUnsafe('notDirectory'));
  assert.equal(countFiles(outside), 5);
});

test('removeAllBeneath handles trees deeper than its fd budget', async (t) => {
  const root = await tempDir(t);
  let rel = 'deep';
  for (let i = 0; i < 150; i++) rel += '/d';
  await mkdirAllBeneath(root, rel);
  await writeFile(join(root, rel, 'leaf'), 'x');
  const fdsBefore = readdirSync('/proc/self/fd').length;
  await removeAllBeneath(root, 'deep');
  assert.equal(existsSync(join(root, 'deep')), false);
  assert.equal(readdirSync('/proc/self/fd').length, fdsBefore, 'no fd leaked');
});

test('removeContentsBeneath empties a directory and keeps it', async (t) => {
  const root = await tempDir(t);
  await fill(join(root, 'v/x'), 2);
  await removeContentsBeneath(root, 'v');
  assert.deepEqual(await readdir(join(root, 'v')), []);
});

mountTest('removal stops at a mount point, including a bind mount of the same filesystem', async (t) => {
  const root = await scratchDir(t);
  await fill(join(root, 'pod/vol/data'), 2);
  await fill(join(root, 'bindsrc'), 3);
  await mkdir(join(root, 'pod/vol/bind'));
  sh('mount', ['--bind', join(root, 'bindsrc'), join(root, 'pod/vol/bind')]);
  await assert.rejects(removeAllBeneath(root, 'pod'), isUnsafe('mount'));
  assert.equal(countFiles(join(root, 'bindsrc')), 3, 'nothing deleted inside the bind mount');
  sh('umount', [join(root, 'pod/vol/bind')]);
  await mkdir(join(root, 'pod/vol/tmp'));
  sh('mount', ['-t', 'tmpfs', 'tmpfs', join(root, 'pod/vol/tmp')]);
  await writeFile(join(root, 'pod/vol/tmp/keep'), 'x');
  await assert.rejects(removeAllBeneath(root, 'pod/vol/tmp'), isUnsafe('mount'));
  await assert.rejects(openDirBeneath(root, 'pod/vol/tmp'), isUnsafe('mount'));
  await assert.rejects(openDirBeneath(root, 'pod/vol/tmp/..x'), isUnsafe('mount'));
  await (await openDirBeneath(root, 'pod/vol/tmp', { crossMounts: 'last' })).close();
  assert.equal(readFileSync(join(root, 'pod/vol/tmp/keep'), 'utf8'), 'x');
  sh('umount', [join(root, 'pod/vol/tmp')]);
  await removeAllBeneath(root, 'pod');
  assert.equal(existsSync(join(root, 'pod')), false);
});

test('a process swapping directories for symlinks during removal never gets anything outside deleted', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  const intact = await precious(outside);
  const iterations = Number(process.env.PODVOL_RACE_ITERATIONS ?? 30);
  const tree = join(root, 'vol/tree');
  const swapper = startSwapper(t, tree, outside);
  let removed = 0;
  let refused = 0;
  for (let i = 0; i < iterations; i++) {
    for (let k = 0; k < 4; k++) await fill(join(tree, `sub${k}/deeper`), 5).catch(() => {});
    try {
      await removeAllBeneath(root, 'vol/tree');
      removed++;
    } catch (err) {
      // A writer that keeps refilling the tree may outlast the retries; that is a clean refusal.
      assert.ok(
        err instanceof UnsafePathError || ['ENOTEMPTY', 'ENOTDIR', 'EEXIST'].includes(String(errnoCode(err))),
        String(err),
      );
      refused++;
    }
    assert.ok(intact(), `iteration ${i}: a file outside was deleted`);
  }
  const exited = new Promise((r) => swapper.once('exit', r));
  swapper.kill('SIGKILL');
  if (swapper.exitCode === null && swapper.signalCode === null) await exited;
  // With the writer gone the removal completes (how often it won the race above depends on load).
  await removeAllBeneath(root, 'vol/tree');
  assert.ok(!existsSync(tree), `tree removed (${removed} removed, ${refused} refused during the race)`);
  assert.ok(intact());
  assert.ok(lstatSync(outside).isDirectory());
});

/** The host's fs calls (`ops`), counting the opens (open and openat2) and the mnt_id reads. */
function countingFs(ops: FsOps = nodeFsOps()) {
  const counted = { ...ops, opens: 0, beneath: 0, mountIds: 0 };
  counted.open = (path, flags, mode) => {
    counted.opens++;
    return ops.open(path, flags, mode);
  };
  const { openBeneath } = ops;
  if (openBeneath) {
    counted.openBeneath = (dirfd, rel, flags, mode) => {
      counted.opens++;
      counted.beneath++;
      return openBeneath(dirfd, rel, flags, mode);
    };
  }
  counted.mountIdOf = (fd) => {
    counted.mountIds++;
    return ops.mountIdOf(fd);
  };
  return counted;
}

const openFds = () => readdirSync('/proc/self/fd').length;

test('withHeldDirs: later walks of one operation start from the directories earlier ones opened', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  // Counted component by component: the walk without openat2 (the test below counts openat2's).
  const fs = countingFs(nodeFsOps({ openat2: false }));
  const sfs = createSafeFs(fs);
  await mkdir(join(root, 'pods/u/volumes/plugin/vol'), { recursive: true });
  const fdsBefore = openFds();
  await sfs.withHeldDirs(async (op) => {
    await op.mkdirAllBeneath(root, 'pods/u/volumes/plugin/vol');
    const first = fs.opens;
    assert.equal(first, 6, 'the root and five components');
    await op.mkdirAllBeneath(root, 'pods/u/volumes/plugin/vol');
    assert.equal(fs.opens, first, 'a second walk opens nothing');
    // Another root at a directory a walk reached uses it.
    await op.mkdirAllBeneath(join(root, 'pods'), 'u/plugins/x');
    assert.equal(fs.opens, first + 2, 'only the two new components');
    // The final component of a walk that may cross a mount there is never held.
    await op.withDirBeneath(root, 'pods/u/volumes/plugin/vol', async () => {}, { crossMounts: 'last' });
    assert.equal(fs.opens, first + 3);
    // A removed directory is not held any more: the next walk re-creates it.
    await op.removeAllBeneath(root, 'pods/u/volumes/plugin');
    await op.withDirBeneath(root, 'pods/u/volumes', (d) => d.fs.mkdir(d.child('plugin'), 0o755));
    await symlink(outside, join(root, 'pods/u/volumes/plugin/vol'));
    // A component that was held but removed since is checked again: the symlink is refused.
    await assert.rejects(op.mkdirAllBeneath(root, 'pods/u/volumes/plugin/vol/x'), isUnsafe('notDirectory'));
    await op.removeContentsBeneath(root, 'pods/u/volumes');
    await assert.rejects(op.openDirBeneath(root, 'pods/u/volumes/plugin'), (e) => errnoCode(e) === 'ENOENT');
    // A held directory is closed at the end of the operation, not by its walk's caller.
    const d = await op.openDirBeneath(root, 'pods/u');
    await d.close();
    await writeFile(d.child('still-open'), 'x');
  });
  assert.deepEqual(await readdir(outside), [], 'nothing written through the symlink');
  assert.equal(readFileSync(join(root, 'pods/u/still-open'), 'utf8'), 'x');
  assert.equal(openFds(), fdsBefore, 'every held directory closed when the operation ended');
  // Outside an operation nothing is held: not through the host's SafeFs while
  // one runs, nor through the operation's once it has ended.
  let opFs!: SafeFs;
  await sfs.withHeldDirs(async (op) => {
    opFs = op;
    const before = fs.opens;
    await sfs.mkdirAllBeneath(root, 'pods/u/volumes');
    await sfs.mkdirAllBeneath(root, 'pods/u/volumes');
    assert.equal(fs.opens, before + 8, 'the host SafeFs holds nothing during an operation');
  });
  const ended = fs.opens;
  await opFs.mkdirAllBeneath(root, 'pods/u/volumes');
  await opFs.mkdirAllBeneath(root, 'pods/u/volumes');
  assert.equal(fs.opens, ended + 8, 'an ended operation holds nothing');
  assert.equal(openFds(), fdsBefore);
});

test('withHeldDirs holds the walks of its own SafeFs only: another host is untouched by the operation', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'pods/u'), { recursive: true });
  const mine = countingFs(nodeFsOps({ openat2: false }));
  const other = countingFs(nodeFsOps({ openat2: false }));
  const sfs = createSafeFs(mine);
  const otherSfs = createSafeFs(other);
  await sfs.withHeldDirs(async (op) => {
    await op.mkdirAllBeneath(root, 'pods/u');
    await otherSfs.mkdirAllBeneath(root, 'pods/u');
    await otherSfs.mkdirAllBeneath(root, 'pods/u');
    await op.mkdirAllBeneath(root, 'pods/u');
  });
  assert.equal(mine.opens, 3, 'the root and two components, once: the second walk reuses them');
  assert.equal(other.opens, 6, 'the other SafeFs opens everything every time');
});

test('withHeldDirs: a held directory is the one its walk checked, wherever it is moved', async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  await mkdir(join(root, 'pods/u/volumes'), { recursive: true });
  await withHeldDirs(async (op) => {
    await op.mkdirAllBeneath(root, 'pods/u/volumes');
    // Swapped for a symlink to outside after the first walk: the held directory is the moved one.
    await rename(join(root, 'pods/u'), join(root, 'pods/moved'));
    await symlink(outside, join(root, 'pods/u'));
    await op.mkdirAllBeneath(root, 'pods/u/volumes/v');
  });
  assert.deepEqual(await readdir(outside), [], 'nothing created through the symlink');
  assert.equal(lstatSync(join(root, 'pods/moved/volumes/v')).isDirectory(), true);
  // Outside an operation the same walk is refused.
  await assert.rejects(mkdirAllBeneath(root, 'pods/u/volumes/w'), isUnsafe('notDirectory'));
});

test('withHeldDirs: work scheduled from inside an operation that runs after it holds nothing', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'pods/u'), { recursive: true });
  let later: Promise<void> | undefined;
  let go!: () => void;
  const gate = new Promise<void>((r) => {
    go = r;
  });
  await withHeldDirs(async (op) => {
    await op.mkdirAllBeneath(root, 'pods/u');
    // Keeps the operation's SafeFs past its end (a timer, a kicked reconciler pass could).
    later = gate.then(async () => {
      const fdsBefore = openFds();
      const d = await op.openDirBeneath(root, 'pods/u');
      await d.close();
      assert.equal(openFds(), fdsBefore, 'its directory was really closed');
    });
  });
  go();
  await later;
});

const openat2Fs = nodeFsOps({ openat2: true });
const openat2Missing =
  process.env.PODVOL_SAFE_FS === 'walk' && 'this run forces the walk (PODVOL_SAFE_FS=walk)';

test('with openat2 a walk below its root is one call and refuses what the walk refuses', {
  skip: openat2Missing,
}, async (t) => {
  const root = await tempDir(t);
  const outside = await tempDir(t);
  await mkdir(join(root, 'a/b/c/d'), { recursive: true });
  const fs = countingFs(openat2Fs);
  const sfs = createSafeFs(fs);
  const d = await sfs.openDirBeneath(root, 'a/b/c/d');
  await writeFile(d.child('f'), 'x');
  await d.close();
  assert.equal(readFileSync(join(root, 'a/b/c/d/f'), 'utf8'), 'x');
  assert.deepEqual(
    { opens: fs.opens, beneath: fs.beneath, mountIds: fs.mountIds },
    { opens: 2, beneath: 1, mountIds: 1 },
    'the root, then the four components in one openat2 (on the root mount by construction: no mnt_id read)',
  );
  // Refused as by the walk, and named by it: the component that is a symlink.
  await symlink(outside, join(root, 'a/b/link'));
  await assert.rejects(
    sfs.openDirBeneath(root, 'a/b/link/x'),
    (e) => isUnsafe('notDirectory')(e) && e instanceof UnsafePathError && e.path === `${root}/a/b/link`,
  );
  await assert.rejects(sfs.mkdirAllBeneath(root, 'a/b/link/new'), isUnsafe('notDirectory'));
  assert.deepEqual(await readdir(outside), [], 'nothing created through the symlink');
  // Missing components are created by the walk after openat2 finds them missing.
  const before = fs.beneath;
  await sfs.mkdirAllBeneath(root, 'a/b/c/d/e/f');
  assert.equal(lstatSync(join(root, 'a/b/c/d/e/f')).isDirectory(), true);
  assert.equal(fs.beneath, before + 1);
});

mountTest(
  'with openat2 a mount point on the way is refused, a bind mount of the same filesystem too',
  async (t) => {
    if (openat2Missing) return t.skip(openat2Missing);
    const root = await scratchDir(t);
    await mkdir(join(root, 'a/m'), { recursive: true });
    await mkdir(join(root, 'src/inside'), { recursive: true });
    sh('mount', ['--bind', join(root, 'src'), join(root, 'a/m')]);
    const fs = countingFs(openat2Fs);
    const sfs = createSafeFs(fs);
    await assert.rejects(sfs.openDirBeneath(root, 'a/m/inside'), isUnsafe('mount'));
    await assert.rejects(sfs.openPathBeneath(root, 'a/m'), isUnsafe('mount'));
    assert.ok(fs.beneath >= 2, 'openat2 was asked first');
    // Allowed where the walk allows it: a mounted volume as the last component.
    const d = await sfs.openDirBeneath(root, 'a/m', { crossMounts: 'last' });
    assert.deepEqual(await readdir(d.procPath), ['inside']);
    await d.close();
  },
);
