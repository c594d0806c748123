// LinuxMounter behaviour the kernel cannot be made to show on demand, driven
// through the injectable runner and fs: every umount variant hanging, systemd
// being present, mount output echoing a secret. Simulated, no root needed.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import pino from 'pino';
import { cleanupMountPoint } from '../../src/mount/cleanup.ts';
import { MountError } from '../../src/mount/errors.ts';
import type { RunRequest, RunResult } from '../../src/mount/exec.ts';
import { createLinuxMounter, type LinuxMounterOptions, maskSensitive } from '../../src/mount/linux.ts';
import { pathTargets } from '../../src/mount/target.ts';
import { recordingLogger } from '../helpers/logger.ts';
import { at } from '../helpers/must.ts';

const TARGET = '/var/lib/podvol/pods/uid/volumes/kubernetes.io~nfs/data';

const ok: RunResult = {
  exitCode: 0,
  signal: undefined,
  output: '',
  timedOut: false,
  spawnErrorCode: undefined,
};
const hang: RunResult = {
  exitCode: undefined,
  signal: 'SIGKILL',
  output: '',
  timedOut: true,
  spawnErrorCode: undefined,
};
const fail = (output: string): RunResult => ({ ...ok, exitCode: 32, output });

/** A runner that answers from a script keyed by the argv it gets, and records requests. */
function scripted(answer: (req: RunRequest) => RunResult) {
  const calls: RunRequest[] = [];
  const runner = async (req: RunRequest) => {
    calls.push(req);
    return answer(req);
  };
  return { runner, calls };
}

/** A mountinfo file listing TARGET (mounted) or not. */
async function mountinfoFile(t: TestContext, mounted: boolean): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'podvol-mi-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const lines = ['1 0 8:1 / / rw - ext4 /dev/sda1 rw'];
  if (mounted) lines.push(`2 1 0:50 / ${TARGET} rw - nfs4 srv:/x rw,vers=4.2`);
  const file = join(dir, 'mountinfo');
  await writeFile(file, `${lines.join('\n')}\n`);
  return file;
}

function mounterWith(opts: LinuxMounterOptions) {
  // The targets here do not exist: named by path, as the simulated runner expects.
  return createLinuxMounter({ systemd: 'off', commandTimeoutMs: 7000, targets: pathTargets, ...opts });
}

describe('unmountWithForce escalation (simulated hung umount)', () => {
  test('plain umount hangs, umount -f works: forced', async (t) => {
    const { runner, calls } = scripted((r) => (r.args[0] === '-f' ? ok : hang));
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, true) });
    assert.equal(await m.unmountWithForce(TARGET, 300), 'forced');
    assert.deepEqual(
      calls.map((c) => [c.file, ...c.args, c.timeoutMs]),
      [
        ['umount', '--no-canonicalize', TARGET, 300],
        ['umount', '-f', '--no-canonicalize', TARGET, 300],
      ],
    );
  });

  test('umount and umount -f both hang: lazy', async (t) => {
    const { runner, calls } = scripted((r) => (r.args[0] === '-l' ? ok : hang));
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, true) });
    assert.equal(await m.unmountWithForce(TARGET, 300), 'lazy');
    assert.deepEqual(
      calls.map((c) => c.args),
      [
        ['--no-canonicalize', TARGET],
        ['-f', '--no-canonicalize', TARGET],
        ['-l', '--no-canonicalize', TARGET],
      ],
    );
  });

  test('umount hangs and umount -f fails while still mounted: lazy', async (t) => {
    const { runner } = scripted((r) =>
      r.args[0] === '-l' ? ok : r.args[0] === '-f' ? fail(`umount: ${TARGET}: target is busy.`) : hang,
    );
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, true) });
    assert.equal(await m.unmountWithForce(TARGET, 300), 'lazy');
  });

  test('everything hangs: a MountError that says it timed out', async (t) => {
    const { runner } = scripted(() => hang);
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, true) });
    await assert.rejects(m.unmountWithForce(TARGET, 300), (err: unknown) => {
      assert.ok(err instanceof MountError);
      assert.equal(err.timedOut, true);
      assert.deepEqual(err.args, ['-l', TARGET]);
      assert.match(err.message, /^unmount failed: timed out/);
      return true;
    });
  });

  test('a plain unmount that hangs is an error, never "not mounted"', async (t) => {
    const { runner } = scripted(() => hang);
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, false) });
    await assert.rejects(m.unmount(TARGET), (err: unknown) => err instanceof MountError && err.timedOut);
  });

  test('umount saying "not mounted" while mountinfo agrees is success', async (t) => {
    const { runner } = scripted(() => fail(`umount: ${TARGET}: not mounted.`));
    const m = mounterWith({ runner, mountInfoPath: await mountinfoFile(t, false) });
    assert.equal(await m.unmount(TARGET), 'not-mounted');
  });
});

describe('corrupted mounts (simulated ENOTCONN from stat)', () => {
  const enotconn = () =>
    Object.assign(new Error(`ENOTCONN: transport endpoint is not connected, '${TARGET}'`), {
      code: 'ENOTCONN',
    });

  test('cleanupMountPoint unmounts and removes without asking whether it is a mount point', async (t) => {
    const removed: string[] = [];
    const { runner, calls } = scripted(() => ok);
    const m = mounterWith({
      runner,
      mountInfoPath: await mountinfoFile(t, true),
      fs: { lstat: async () => ({ dev: 1, isSymbolicLink: () => false }) },
    });
    await cleanupMountPoint(TARGET, m, false, {
      fs: {
        stat: async () => Promise.reject(enotconn()),
        access: async () => {},
        rmdir: async (p) => {
          removed.push(p);
        },
        unlink: async () => assert.fail('a directory is removed with rmdir'),
      },
    });
    assert.deepEqual(
      calls.map((c) => [c.file, ...c.args]),
      [['umount', '--no-canonicalize', TARGET]],
    );
    assert.deepEqual(removed, [TARGET]);
  });

  test('getMountRefs treats it as unmounted; isMountPoint still finds it in mountinfo', async (t) => {
    const m = mounterWith({
      runner: scripted(() => ok).runner,
      mountInfoPath: await mountinfoFile(t, true),
      fs: { stat: async () => Promise.reject(enotconn()), realpath: async () => Promise.reject(enotconn()) },
    });
    assert.deepEqual(await m.getMountRefs(TARGET), []);
    assert.equal(await m.isMountPoint(TARGET), true);
  });
});

describe('systemd-run wrapping (simulated systemd)', () => {
  async function systemdHost(t: TestContext) {
    const runDir = await mkdtemp(join(tmpdir(), 'podvol-systemd-'));
    t.after(() => rm(runDir, { recursive: true, force: true }));
    return runDir;
  }

  test('when the probe succeeds, mounts run in a transient scope; WithoutSystemd ones do not', async (t) => {
    const { runner, calls } = scripted(() => ok);
    const m = createLinuxMounter({
      runner,
      systemdRuntimeDir: await systemdHost(t),
      commandTimeoutMs: 7000,
      targets: pathTargets,
    });
    await m.mount('srv:/export', TARGET, 'nfs', ['vers=4.1', 'hard']);
    await m.mount('tmpfs', '/x', 'tmpfs', ['size=1m'], { withoutSystemd: true });
    assert.deepEqual(
      calls.map((c) => [c.file, ...c.args]),
      [
        ['systemd-run', '--description=Kubernetes systemd probe', '--scope', 'true'],
        [
          'systemd-run',
          `--description=Kubernetes transient mount for ${TARGET}`,
          '--scope',
          '--',
          'mount',
          '--no-canonicalize',
          '-t',
          'nfs',
          '-o',
          'vers=4.1,hard',
          'srv:/export',
          TARGET,
        ],
        ['mount', '--no-canonicalize', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', '/x'],
      ],
    );
  });

  test("systemd: 'off' never probes", async (t) => {
    const { runner, calls } = scripted(() => ok);
    const m = createLinuxMounter({
      runner,
      systemd: 'off',
      systemdRuntimeDir: await systemdHost(t),
      targets: pathTargets,
    });
    await m.mount('tmpfs', '/x', 'tmpfs', []);
    assert.deepEqual(
      calls.map((c) => c.file),
      ['mount'],
    );
  });
});

describe('sensitive options and timeouts (simulated mount output)', () => {
  test('secrets are masked in logs, arguments and echoed output', async () => {
    const { runner, calls } = scripted(() =>
      fail('mount.nfs: security flavor sec=krb5p (krb5p) not supported'),
    );
    const logged: string[] = [];
    const logger = recordingLogger((_level, obj, msg) => logged.push(`${msg} ${JSON.stringify(obj)}`));
    const m = mounterWith({ runner, logger });
    await assert.rejects(
      m.mount('srv:/e', TARGET, 'nfs', ['vers=4'], { sensitiveOptions: ['sec=krb5p'] }),
      (err: unknown) => {
        assert.ok(err instanceof MountError);
        assert.deepEqual(err.args, [
          '--no-canonicalize',
          '-t',
          'nfs',
          '-o',
          'vers=4,<masked>',
          'srv:/e',
          TARGET,
        ]);
        assert.equal(err.output, 'mount.nfs: security flavor <masked> (<masked>) not supported');
        assert.ok(!err.message.includes('krb5p'));
        return true;
      },
    );
    // Only the real command line carries it.
    assert.deepEqual(at(calls, 0).args, [
      '--no-canonicalize',
      '-t',
      'nfs',
      '-o',
      'vers=4,sec=krb5p',
      'srv:/e',
      TARGET,
    ]);
    assert.ok(logged.length > 0 && logged.every((l) => !l.includes('krb5p')));
    assert.equal(
      maskSensitive('bad password=hunter2 (hunter2)', ['password=hunter2']),
      'bad <masked> (<masked>)',
    );
  });

  test('every command carries the configured timeout; a mount that hangs says so', async () => {
    const { runner, calls } = scripted(() => hang);
    const m = mounterWith({ runner, commandTimeoutMs: 1234 });
    await assert.rejects(m.mount('tmpfs', '/x', 'tmpfs', ['size=1m']), (err: unknown) => {
      assert.ok(err instanceof MountError && err.timedOut);
      assert.match(err.message, /^mount failed: timed out after 1234 ms/);
      return true;
    });
    assert.equal(at(calls, 0).timeoutMs, 1234);
  });

  test('a bind whose remount fails is taken down again', async (t) => {
    const { runner, calls } = scripted((r) =>
      r.args.includes('bind,remount,ro') ? fail('remount failed') : ok,
    );
    const m = mounterWith({
      runner,
      mountInfoPath: await mountinfoFile(t, true),
      fs: { realpath: async (p) => p },
    });
    await assert.rejects(m.mount('/src', TARGET, '', ['bind', 'ro']), MountError);
    assert.deepEqual(
      calls.map((c) => c.args),
      [
        ['--no-canonicalize', '-o', 'bind', '/src', TARGET],
        ['--no-canonicalize', '-o', 'bind,remount,ro', '/src', TARGET],
        ['--no-canonicalize', TARGET],
      ],
    );
  });

  test('a pino logger fits the logger option', () => {
    createLinuxMounter({ logger: pino({ level: 'silent' }) });
  });
});
