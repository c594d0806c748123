// Real mounts, inside the private mount namespace scripts/test.ts sets up.

import assert from 'node:assert/strict';
import cp from 'node:child_process';
import { mkdir, open, readFile, statfs, symlink, writeFile } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { describe, mock, type TestContext } from 'node:test';
import { errnoCode } from '../../src/errno.ts';
import { cleanupMountPoint } from '../../src/mount/cleanup.ts';
import { isCorruptedMountError, MountError, MountOptionError } from '../../src/mount/errors.ts';
import { createExecaRunner, recordingRunner } from '../../src/mount/exec.ts';
import { createLinuxMounter } from '../../src/mount/linux.ts';
import { pathExists, statfsType, TMPFS_MAGIC, tmpfsNoswapSupported } from '../../src/mount/probe.ts';
import { recordingLogger } from '../helpers/logger.ts';
import { mountTest } from '../helpers/mountns.ts';
import { mountTable } from '../helpers/mounts.ts';
import { fuseAvailable, mountDaemonlessFuse, scratchDir, sh } from './helpers.ts';

function setup() {
  const runner = recordingRunner(createExecaRunner());
  const lines: string[] = [];
  const logger = recordingLogger((level, obj, msg) =>
    lines.push(`${level} ${msg ?? ''} ${JSON.stringify(obj)}`),
  );
  const mounter = createLinuxMounter({ runner, logger, commandTimeoutMs: 10_000 });
  return { runner, mounter, lines, logger };
}

async function dirIn(parent: string, name: string): Promise<string> {
  const p = join(parent, name);
  await mkdir(p, { recursive: true });
  return p;
}

function entryAt(path: string) {
  return mountTable().findLast((m) => m.mountPoint === path);
}

async function errnoOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return errnoCode(err);
  }
}

describe('LinuxMounter on real mounts', () => {
  mountTest('tmpfs with a size: mounted, sized, detected, unmounted', async (t) => {
    const { mounter, runner } = setup();
    const dir = await dirIn(await scratchDir(t), 'tmp');
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=4m', 'nosuid', 'nodev'], { withoutSystemd: true });

    // The target by handle (src/mount/target.ts): this process's descriptor of the directory.
    const [first] = runner.calls;
    assert.deepEqual(first?.args.slice(0, -1), [
      '--no-canonicalize',
      '-t',
      'tmpfs',
      '-o',
      'size=4m,nosuid,nodev',
      'tmpfs',
    ]);
    assert.match(first?.args.at(-1) ?? '', new RegExp(`^/proc/${process.pid}/fd/\\d+$`));
    assert.equal(first?.file, 'mount');
    assert.equal(await mounter.isMountPoint(dir), true);
    assert.equal(await mounter.isLikelyNotMountPoint(dir), false);
    assert.equal(await statfsType(dir), TMPFS_MAGIC);
    const fs = await statfs(dir);
    assert.equal(fs.blocks * fs.bsize, 4 * 1024 * 1024);
    const entry = entryAt(dir);
    assert.ok(entry?.superOptions.includes('size=4096k'));
    assert.ok(entry?.mountOptions.includes('nosuid') && entry.mountOptions.includes('nodev'));
    // The size really limits what fits.
    assert.equal(await errnoOf(writeFile(join(dir, 'big'), Buffer.alloc(5 * 1024 * 1024))), 'ENOSPC');

    assert.equal(await mounter.unmount(dir), 'unmounted');
    assert.equal(await mounter.isMountPoint(dir), false);
    assert.equal(await mounter.isLikelyNotMountPoint(dir), true);
  });

  mountTest('tmpfs noswap is supported here, by version and by a real probe mount', async (t) => {
    const { mounter } = setup();
    const dir = await dirIn(await scratchDir(t), 'probe');
    assert.equal(await tmpfsNoswapSupported(), true);
    // Pretend an old kernel so the probe really mounts.
    assert.equal(await tmpfsNoswapSupported({ kernelRelease: '5.15.0', probe: { mounter, dir } }), true);
    assert.equal(await mounter.isMountPoint(dir), false);
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m', 'noswap']);
    assert.ok(entryAt(dir)?.superOptions.includes('noswap'));
  });

  mountTest(
    'a target that does not exist: the MountError mount(8) and the fake mounter give, nothing run',
    async (t) => {
      const { mounter, runner } = setup();
      const root = await scratchDir(t);
      const missing = join(root, 'missing');
      await assert.rejects(mounter.mount('tmpfs', missing, 'tmpfs', []), (err: unknown) => {
        assert.ok(err instanceof MountError, String(err));
        assert.equal(err.exitCode, 32);
        assert.match(err.output, /mount point does not exist/);
        return true;
      });
      assert.equal(runner.calls.length, 0);
    },
  );

  mountTest('bind mount rw: two steps, and writes go through to the source', async (t) => {
    const { mounter, runner } = setup();
    const root = await scratchDir(t);
    const src = await dirIn(root, 'src');
    const dst = await dirIn(root, 'dst');
    await writeFile(join(src, 'hello'), 'hi');
    await mounter.mount(src, dst, '', ['bind']);

    assert.deepEqual(runner.calls[0]?.args.slice(0, -1), ['--no-canonicalize', '-o', 'bind', src]);
    const remount = runner.calls[1]?.args ?? [];
    assert.equal(remount[1], '-o');
    assert.ok(remount[2]?.startsWith('bind,remount'), remount[2]);
    // The remount acts on the new mount, by its own handle, not the directory under it.
    assert.notEqual(remount.at(-1), runner.calls[0]?.args.at(-1));
    assert.equal(await readFile(join(dst, 'hello'), 'utf8'), 'hi');
    await writeFile(join(dst, 'back'), 'x');
    assert.equal(await readFile(join(src, 'back'), 'utf8'), 'x');
  });

  mountTest(
    'bind mount ro: a write into the target fails with EROFS, the source stays writable',
    async (t) => {
      const { mounter } = setup();
      const root = await scratchDir(t);
      const src = await dirIn(root, 'src');
      const dst = await dirIn(root, 'dst');
      await mounter.mount(src, dst, '', ['bind', 'ro', 'nosuid', 'nodev', 'noexec']);

      assert.equal(await errnoOf(writeFile(join(dst, 'f'), 'x')), 'EROFS');
      await writeFile(join(src, 'f'), 'x');
      const opts = entryAt(dst)?.mountOptions ?? [];
      for (const flag of ['ro', 'nosuid', 'nodev', 'noexec'])
        assert.ok(opts.includes(flag), `${flag} in ${opts}`);
    },
  );

  mountTest('a bind keeps the nosuid of its source mount even when not asked for', async (t) => {
    const { mounter } = setup();
    const root = await scratchDir(t);
    const srcMount = await dirIn(root, 'srcfs');
    const dst = await dirIn(root, 'dst');
    sh('mount', ['-t', 'tmpfs', '-o', 'size=1m,nosuid,noexec', 'tmpfs', srcMount]);
    await mounter.mount(srcMount, dst, '', ['bind']);
    const opts = entryAt(dst)?.mountOptions ?? [];
    assert.ok(opts.includes('nosuid') && opts.includes('noexec'), opts.join(','));
  });

  mountTest('nested mounts and getMountRefs', async (t) => {
    const { mounter } = setup();
    const root = await scratchDir(t);
    const vol = await dirIn(root, 'vol');
    const a = await dirIn(root, 'pod-a');
    const b = await dirIn(root, 'pod-b');
    await mounter.mount('tmpfs', vol, 'tmpfs', ['size=1m']);
    const sub = await dirIn(vol, 'sub');
    const nested = await dirIn(vol, 'nested');
    await mounter.mount('tmpfs', nested, 'tmpfs', ['size=1m']);
    await mounter.mount(sub, a, '', ['bind']);
    await mounter.mount(sub, b, '', ['bind']);

    assert.equal(entryAt(nested)?.parentId, entryAt(vol)?.id);
    assert.deepEqual(await mounter.getMountRefs(sub), [a, b]);
    assert.deepEqual(await mounter.getMountRefs(a), [b]);
    assert.deepEqual(await mounter.getMountRefs(nested), []);
    assert.deepEqual(await mounter.getMountRefs(join(root, 'missing')), []);
    assert.equal(await mounter.isMountPoint(nested), true);
    assert.ok((await mounter.list()).some((m) => m.mountPoint === nested));

    // The parent cannot go while a child is mounted on it.
    await assert.rejects(
      mounter.unmount(vol),
      (err: unknown) =>
        err instanceof MountError &&
        err.code === 'EBUSY' &&
        err.message.includes(`mounted below it: ${nested}`),
    );
    assert.equal(await mounter.unmount(nested), 'unmounted');
  });

  mountTest('unmount of a busy mount fails with EBUSY and the command, arguments and output', async (t) => {
    const { mounter } = setup();
    const dir = await dirIn(await scratchDir(t), 'busy');
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    const fh = await open(join(dir, 'held'), 'w');
    try {
      await assert.rejects(mounter.unmount(dir), (err: unknown) => {
        assert.ok(err instanceof MountError);
        assert.equal(err.code, 'EBUSY');
        assert.equal(err.command, 'umount');
        assert.deepEqual(err.args, [dir]);
        // The holder is this test process itself, through the open file.
        assert.ok(
          err.message.startsWith(
            `unmount failed: exit status 32: target is busy, held by pid ${process.pid} (node): open file ${join(dir, 'held')}\nUnmounting command: umount\n`,
          ),
          err.message,
        );
        assert.match(err.output, /target is busy/);
        return true;
      });
      assert.equal(await mounter.isMountPoint(dir), true);
    } finally {
      await fh.close();
    }
    assert.equal(await mounter.unmount(dir), 'unmounted');
  });

  mountTest('unmount of an absent path and of a never-mounted directory is success', async (t) => {
    const { mounter, runner } = setup();
    const root = await scratchDir(t);
    const plain = await dirIn(root, 'plain');
    assert.equal(await mounter.unmount(join(root, 'absent')), 'not-mounted');
    assert.equal(await mounter.unmount(plain), 'not-mounted');
    assert.equal(await mounter.unmountWithForce(plain, 5000), 'not-mounted');
    // umount really ran each time; "not mounted" was judged from mountinfo.
    assert.equal(runner.calls.filter((c) => c.file === 'umount').length, 3);
  });

  mountTest('a hung FUSE mount: the first umount ends it, nothing asks the filesystem', async (t) => {
    if (!fuseAvailable()) return t.skip('/dev/fuse is not usable');
    const { mounter, runner, lines } = setup();
    const dir = await dirIn(await scratchDir(t), 'hung');
    // Real: the FUSE connection is open but nobody answers. umount(8) resolving
    // the path itself blocked in stat; named through the parent's handle and not
    // canonicalised (target.ts), the umount(2) needs no answer.
    mountDaemonlessFuse(t, dir);
    assert.equal(await mounter.unmountWithForce(dir, 1000), 'unmounted');
    assert.equal(runner.calls.length, 1);
    assert.deepEqual(runner.calls[0]?.args.slice(0, -1), ['--no-canonicalize']);
    assert.match(runner.calls[0]?.args.at(-1) ?? '', new RegExp(`^/proc/${process.pid}/fd/\\d+/hung$`));
    assert.ok(!lines.some((l) => l.includes('trying with -f')));
    assert.equal(entryAt(dir), undefined);
  });

  mountTest('cleanupMountPoint removes a plain directory without running umount', async (t) => {
    const { mounter, runner } = setup();
    const dir = await dirIn(await scratchDir(t), 'plain');
    await cleanupMountPoint(dir, mounter, false);
    assert.equal((await pathExists(dir)).exists, false);
    assert.equal(runner.calls.length, 0);
    // Nothing there any more: still fine.
    await cleanupMountPoint(dir, mounter, true);
  });

  mountTest('cleanupMountPoint unmounts and removes a mount point, stacked mounts included', async (t) => {
    const { mounter } = setup();
    const root = await scratchDir(t);
    const dir = await dirIn(root, 'mnt');
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=2m']);
    await cleanupMountPoint(dir, mounter, false);
    assert.equal(entryAt(dir), undefined);
    assert.equal((await pathExists(dir)).exists, false);
  });

  mountTest(
    'extensive cleanup catches a same-filesystem bind mount that the cheap check misses',
    async (t) => {
      const { mounter } = setup();
      const root = await scratchDir(t);
      const src = await dirIn(root, 'src');
      const dst = await dirIn(root, 'dst');
      await mounter.mount(src, dst, '', ['bind']);
      // Same device on both sides: the device-number check cannot see this mount.
      assert.equal(await mounter.isLikelyNotMountPoint(dst), true);
      assert.equal(await mounter.isMountPoint(dst), true);
      await cleanupMountPoint(dst, mounter, true);
      assert.equal(entryAt(dst), undefined);
      assert.equal((await pathExists(dst)).exists, false);
    },
  );

  mountTest('cleanupMountPoint removes a bind-mounted file', async (t) => {
    const { mounter } = setup();
    const root = await scratchDir(t);
    const src = join(root, 'token');
    const dst = join(root, 'token-target');
    await writeFile(src, 'secret');
    await writeFile(dst, '');
    await mounter.mount(src, dst, '', ['bind', 'ro']);
    await cleanupMountPoint(dst, mounter, true);
    assert.equal((await pathExists(dst)).exists, false);
    assert.equal((await pathExists(src)).exists, true);
  });

  mountTest('cleanupMountPoint on a corrupted mount (FUSE whose daemon went away)', async (t) => {
    if (!fuseAvailable()) return t.skip('/dev/fuse is not usable');
    const { mounter, lines, logger } = setup();
    const dir = await dirIn(await scratchDir(t), 'dead');
    // Real: closing /dev/fuse aborts the connection; from then on stat fails with ENOTCONN.
    mountDaemonlessFuse(t, dir).kill();
    const state = await pathExists(dir);
    assert.equal(state.exists, true);
    assert.equal(state.corrupted, true);
    assert.equal(state.error?.code, 'ENOTCONN');
    assert.ok(isCorruptedMountError(state.error));
    assert.equal(await mounter.isMountPoint(dir), true);
    assert.deepEqual(await mounter.getMountRefs(dir), []);

    await cleanupMountPoint(dir, mounter, true, { logger });
    assert.equal(entryAt(dir), undefined);
    assert.equal((await pathExists(dir)).exists, false);
    assert.ok(lines.some((l) => l.includes('corrupted mount, unmounting')));
  });

  mountTest('mount point checks: ENOENT is thrown, symlinks are not mount points but resolve', async (t) => {
    const { mounter } = setup();
    const root = await scratchDir(t);
    const dir = await dirIn(root, 'm');
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    const link = join(root, 'link');
    await symlink(dir, link);
    assert.equal(await mounter.isLikelyNotMountPoint(link), true);
    assert.equal(await mounter.isMountPoint(link), true);
    assert.equal(await errnoOf(mounter.isLikelyNotMountPoint(join(root, 'nope'))), 'ENOENT');
    assert.equal(await errnoOf(mounter.isMountPoint(join(root, 'nope'))), 'ENOENT');
  });

  mountTest(
    'a failed mount reports command, masked arguments and output; secrets appear nowhere',
    async (t) => {
      const { mounter, lines } = setup();
      const dir = await dirIn(await scratchDir(t), 'm');
      // uid is a valid option, but 99999999999 does not fit in 32 bits, so the kernel refuses it.
      const secret = 'uid=99999999999';
      await assert.rejects(
        mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m'], { sensitiveOptions: [secret] }),
        (err: unknown) => {
          assert.ok(err instanceof MountError);
          // The target as given (it went to mount(8) as a handle, see target.ts).
          assert.deepEqual(err.args, [
            '--no-canonicalize',
            '-t',
            'tmpfs',
            '-o',
            'size=1m,<masked>',
            'tmpfs',
            dir,
          ]);
          assert.match(
            err.message,
            /^mount failed: exit status \d+\nMounting command: mount\nMounting arguments: /,
          );
          assert.ok(err.output.length > 0);
          assert.ok(!err.message.includes('99999999999'));
          return true;
        },
      );
      assert.ok(lines.length > 0 && lines.every((l) => !l.includes('99999999999')));
    },
  );

  mountTest('systemd is not PID 1 here: the probe says no without starting anything', async (t) => {
    const { mounter, runner } = setup();
    assert.equal(await mounter.systemdAvailable(), false);
    assert.equal(runner.calls.length, 0);
    // With the runtime directory present the real probe runs, fails, and still answers false.
    const fakeRun = await scratchDir(t);
    const probing = createLinuxMounter({ runner, systemdRuntimeDir: fakeRun, commandTimeoutMs: 10_000 });
    assert.equal(await probing.systemdAvailable(), false);
    assert.deepEqual(runner.calls[0], {
      file: 'systemd-run',
      args: ['--description=Kubernetes systemd probe', '--scope', 'true'],
      timeoutMs: 10_000,
    });
    const dir = await dirIn(await scratchDir(t), 'm');
    await probing.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    assert.equal(runner.calls.at(-1)?.file, 'mount');
  });
});

describe('option injection is refused before any process starts', () => {
  function spySpawn(t: TestContext) {
    const spy = mock.method(cp, 'spawn');
    syncBuiltinESMExports();
    t.after(() => {
      spy.mock.restore();
      syncBuiltinESMExports();
    });
    return spy;
  }

  mountTest('no process runs for any of these, and nothing gets mounted', async (t) => {
    const { mounter, runner } = setup();
    const dir = await dirIn(await scratchDir(t), 'target');
    const spawn = spySpawn(t);
    const attempts: Array<
      [string, string, string, string[], { sensitiveOptions?: string[]; mountFlags?: string[] }?]
    > = [
      ['tmpfs', dir, 'tmpfs', ['size=1m,exec']],
      ['tmpfs', dir, 'tmpfs', ['size=1m', '-oexec']],
      ['tmpfs', dir, 'tmpfs', ['size=1m\nexec']],
      ['tmpfs', dir, 'tmpfs', ['size=1m\0exec']],
      ['tmpfs', dir, 'tmpfs', ['size=1m', 'suid', 'dev', 'upperdir=/etc']],
      ['tmpfs', dir, 'tmpfs', ['size=1m'], { sensitiveOptions: ['mode=0777,exec'] }],
      ['tmpfs', dir, 'tmpfs', ['size=1m'], { mountFlags: ['--options-source=disable'] }],
      ['--rbind', dir, 'tmpfs', ['size=1m']],
      ['tmpfs', 'relative/target', 'tmpfs', ['size=1m']],
      ['tmpfs', dir, 'tmpfs -o exec', ['size=1m']],
      ['server:/export', dir, 'nfs', ['vers=4', 'addr=10.0.0.1,sec=none']],
    ];
    for (const [source, target, fstype, options, call] of attempts) {
      await assert.rejects(mounter.mount(source, target, fstype, options, call), MountOptionError);
    }
    await assert.rejects(mounter.unmount('relative'), MountOptionError);
    assert.equal(runner.calls.length, 0);
    assert.equal(spawn.mock.callCount(), 0);
    assert.equal(await mounter.isMountPoint(dir), false);

    // Positive control: the spy does see processes the mounter starts.
    await mounter.mount('tmpfs', dir, 'tmpfs', ['size=1m']);
    assert.ok(spawn.mock.callCount() >= 1);
  });
});

describe('mount and unmount targets by handle (target.ts)', () => {
  mountTest(
    'a symlink at the target or on the way is refused with UnsafePath; nothing is mounted or unmounted through it',
    async (t) => {
      const { mounter, runner } = setup();
      const root = await scratchDir(t);
      const outside = await dirIn(root, 'outside');
      const inside = await dirIn(root, 'inside');
      await symlink(outside, join(inside, 'link'));
      await mkdir(join(outside, 'below'));
      const refused = (err: unknown) => (err as { reason?: string }).reason === 'UnsafePath';
      // The target itself is a symlink.
      await assert.rejects(mounter.mount('tmpfs', join(inside, 'link'), 'tmpfs', ['size=1m']), refused);
      // A directory on the way is a symlink.
      await assert.rejects(
        mounter.mount('tmpfs', join(inside, 'link', 'below'), 'tmpfs', ['size=1m']),
        refused,
      );
      assert.equal(runner.calls.length, 0);
      assert.equal(entryAt(outside), undefined);
      assert.equal(entryAt(join(outside, 'below')), undefined);
      // Something mounted outside is not unmounted through a symlink to it.
      await mounter.mount('tmpfs', outside, 'tmpfs', ['size=1m']);
      await assert.rejects(mounter.unmount(join(inside, 'link')), refused);
      assert.ok(entryAt(outside));
      assert.equal(await mounter.unmount(outside), 'unmounted');
    },
  );
});
