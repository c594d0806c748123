import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MountOptionError } from '../../src/mount/errors.ts';
import {
  checkMountArguments,
  checkMountOptions,
  validateMountOptions,
  validateUserMountOptions,
} from '../../src/mount/options.ts';
import { at } from '../helpers/must.ts';

function problemsOf(fstype: string, options: string[], trust?: 'user') {
  return checkMountOptions(fstype, options, { trust }).map((p) => p.problem);
}

describe('mount option hygiene', () => {
  test('accepts what emptyDir, hugepages and NFS volumes pass', () => {
    validateMountOptions('tmpfs', ['size=67108864', 'noswap', 'mode=0755', 'nosuid', 'nodev', 'noexec']);
    validateMountOptions('tmpfs', ['size=50%', 'uid=1000', 'gid=1000', 'huge=within_size', 'nr_inodes=10k']);
    validateMountOptions('hugetlbfs', ['pagesize=2Mi', 'size=1G', 'min_size=0', 'mode=1770']);
    validateMountOptions('nfs', [
      'vers=4.1',
      'hard',
      'timeo=600',
      'retrans=2',
      'proto=tcp',
      'sec=krb5p',
      'ro',
    ]);
    validateMountOptions('', ['bind', 'remount', 'ro', 'nosuid', 'nodev', 'noexec']);
  });

  test("a ',' inside an option is refused: it would add options", () => {
    assert.deepEqual(problemsOf('nfs', ['addr=10.0.0.1,suid']), [
      "contains ',' which would split it into several mount options",
    ]);
  });

  test("a leading '-', a newline, a NUL or another control character is refused", () => {
    assert.deepEqual(problemsOf('tmpfs', ['-oexec', 'size=1m\nexec', 'size=1\0', 'mode=07\t55']), [
      "starts with '-' and would be read as a command-line flag",
      'contains a newline',
      'contains a NUL byte',
      'contains a control character',
    ]);
    assert.deepEqual(problemsOf('nfs', ['addr=-1']), ["value starts with '-'"]);
  });

  test('options outside the filesystem allowlist are refused', () => {
    assert.deepEqual(problemsOf('tmpfs', ['upperdir=/etc', 'errors=panic']), [
      'upperdir is not an allowed option for fstype "tmpfs"',
      'errors is not an allowed option for fstype "tmpfs"',
    ]);
    // An unknown filesystem gets only the generic per-mount flags.
    assert.deepEqual(problemsOf('fuse.sshfs', ['ro', 'ProxyCommand=touch /x']), [
      'ProxyCommand is not an allowed option for fstype "fuse.sshfs"',
    ]);
  });

  test('values are checked against the option', () => {
    assert.deepEqual(problemsOf('tmpfs', ['size=lots', 'huge=sometimes', 'noswap=1', 'mode=']), [
      'value is not valid for size',
      'huge must be one of never, always, within_size, advise, deny, force',
      'noswap takes no value',
      'mode needs a value',
    ]);
  });

  test('a pod or PV spec may not ask for suid, dev, exec, bind or remount', () => {
    assert.throws(
      () => validateUserMountOptions('nfs', ['vers=4', 'suid', 'remount']),
      (err: unknown) =>
        err instanceof MountOptionError &&
        err.problems.length === 2 &&
        err.message.includes('"suid": suid may not be requested by a pod or volume spec'),
    );
    validateUserMountOptions('nfs', ['vers=4', 'nosuid', 'ro']);
  });

  test('plugins can allow extra options for their own filesystem', () => {
    validateUserMountOptions('fuse.s3', ['region=eu-west-1'], ['region']);
    assert.throws(() => validateUserMountOptions('fuse.s3', ['region=a,b'], ['region']), /contains ','/);
  });

  test('sensitive options are never echoed in problems', () => {
    const err = (() => {
      try {
        validateMountOptions('cifs', ['password=hunter2,domain=x'], { sensitive: true });
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected a rejection');
    })();
    assert.ok(err.message.includes('<masked>'));
    assert.ok(!err.message.includes('hunter2'));
  });

  test('the error lists every problem and says nothing ran', () => {
    assert.throws(
      () => validateMountOptions('tmpfs', ['size=1m,exec', 'bogus']),
      /^MountOptionError: refused mount request \(fstype "tmpfs"\), nothing was run: "size=1m,exec": .*; "bogus": bogus is not an allowed option/,
    );
  });
});

describe('mount argument hygiene', () => {
  test('source and target may not pose as flags; the target must be absolute', () => {
    const problems = checkMountArguments({ source: '--bind', target: 'relative', fstype: 'tmpfs' });
    assert.deepEqual(
      problems.map((p) => p.problem),
      ['target must be an absolute path', "source starts with '-' and would be read as a command-line flag"],
    );
  });

  test('fstype and extra mount flags are checked', () => {
    const problems = checkMountArguments({
      source: 'x',
      target: '/x',
      fstype: 'tmpfs -o exec',
      mountFlags: ['--no-canonicalize', '--options-source=disable'],
    });
    assert.equal(problems.length, 2);
    assert.equal(at(problems, 0).problem, 'not a valid filesystem type');
    assert.match(at(problems, 1).problem, /mount flag not allowed/);
  });
});
