import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { MountInfoError } from '../../src/mount/errors.ts';
import {
  consistentRead,
  isMountPointIn,
  parseMountInfo,
  readMountInfo,
  searchMountRefs,
  unescapeOctal,
} from '../../src/mount/mountinfo.ts';
import { mountTest } from '../helpers/mountns.ts';
import { mountTable } from '../helpers/mounts.ts';
import { at, only } from '../helpers/must.ts';
import { rawMountInfo, scratchDir, sh } from './helpers.ts';

describe('parseMountInfo', () => {
  test('parses every field of the proc(5) example line', () => {
    const [m] = parseMountInfo(
      '36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n',
    );
    assert.deepEqual(m, {
      id: 36,
      parentId: 35,
      major: 98,
      minor: 0,
      root: '/mnt1',
      mountPoint: '/mnt2',
      mountOptions: ['rw', 'noatime'],
      optionalFields: ['master:1'],
      fsType: 'ext3',
      source: '/dev/root',
      superOptions: ['rw', 'errors=continue'],
    });
  });

  test('takes any number of optional fields, including none', () => {
    const infos = parseMountInfo(
      [
        '1 0 0:1 / / rw - rootfs rootfs rw',
        '2 1 0:2 / /a rw shared:1 master:2 propagate_from:3 unbindable - tmpfs tmpfs rw',
      ].join('\n'),
    );
    assert.deepEqual(at(infos, 0).optionalFields, []);
    assert.deepEqual(at(infos, 1).optionalFields, ['shared:1', 'master:2', 'propagate_from:3', 'unbindable']);
    assert.equal(at(infos, 1).fsType, 'tmpfs');
  });

  test('decodes \\040 \\011 \\012 \\134 in root, mount point, source and super options', () => {
    const m = only(
      parseMountInfo('5 1 0:9 /r\\040t /m\\040a\\011b\\012c\\134d rw - tmpfs my\\040src rw,opt=a\\054b\n'),
    );
    assert.equal(m.root, '/r t');
    assert.equal(m.mountPoint, '/m a\tb\nc\\d');
    assert.equal(m.source, 'my src');
    // seq_show_option escapes ',' in values as \054; splitting happens before decoding.
    assert.deepEqual(m.superOptions, ['rw', 'opt=a,b']);
  });

  test('an escaped backslash followed by digits is not decoded twice', () => {
    assert.equal(unescapeOctal('a\\134040b'), 'a\\040b');
  });

  test('escaped non-ASCII bytes are decoded as UTF-8', () => {
    assert.equal(unescapeOctal('caf\\303\\251'), 'café');
  });

  test('strips the \\040(deleted) suffix and flags the entry', () => {
    const m = only(
      parseMountInfo('7 1 8:1 /f//deleted /etc/resolv.conf\\040(deleted) rw - ext4 /dev/sda1 rw\n'),
    );
    assert.equal(m.mountPoint, '/etc/resolv.conf');
    assert.equal(m.deleted, true);
    assert.equal(m.root, '/f//deleted');
    assert.ok(isMountPointIn([m], '/etc/resolv.conf'));
    // The kernel prints a directory really named "x (deleted)" the same way; that path matches too.
    assert.ok(isMountPointIn([m], '/etc/resolv.conf (deleted)'));
  });

  test('rejects lines with too few fields or no separator, naming the line', () => {
    assert.throws(() => parseMountInfo('1 0 0:1 / / rw - tmpfs\n'), /line 1: wrong number of fields/);
    assert.throws(() => parseMountInfo('1 0 0:1 / / rw\n'), MountInfoError);
    assert.throws(
      () => parseMountInfo('1 0 0:1 / / rw - a b c\n2 1 0:2 / /x rw shared:1 tmpfs x rw\n'),
      /line 2: no "-" separator/,
    );
    assert.throws(() => parseMountInfo('x 0 0:1 / / rw - a b c\n'), /mount ID is not a number/);
  });

  test('names the malformed part of the ID and major:minor fields', () => {
    const line = (head: string) => `${head} / / rw - a b c\n`;
    assert.throws(() => parseMountInfo(line('1 y 0:1')), /line 1: parent ID is not a number: "y"/);
    assert.throws(() => parseMountInfo(line('12x 0 0:1')), /mount ID is not a number: "12x"/);
    assert.throws(() => parseMountInfo(line('1 0 01')), /major:minor has no colon/);
    assert.throws(() => parseMountInfo(line('1 0 a:1')), /major is not a number: "a"/);
    assert.throws(() => parseMountInfo(line('1 0 8:1x')), /minor is not a number: "1x"/);
    assert.throws(() => parseMountInfo(line('1 0 8:1:2')), /minor is not a number: "1:2"/);
    assert.throws(() => parseMountInfo(line('1 0 :1')), /empty major/);
    assert.throws(() => parseMountInfo(line('1 0 8:')), /empty minor/);
    assert.throws(() => parseMountInfo('1 0 8:1\n'), /line 1: wrong number of fields/);
  });

  test('decodes escapes only on the lines that have them, wherever they are in the table', () => {
    const infos = parseMountInfo(
      [
        '1 0 0:1 / /plain rw - tmpfs a\\040b rw',
        '2 1 0:2 / /also\\040plain rw - tmpfs src rw',
        '3 1 0:3 / /x rw - tmpfs src rw',
        '4 1 0:4 /r\\134 /last\\011 rw - tmpfs src rw',
      ].join('\n'),
    );
    assert.deepEqual(
      infos.map((m) => [m.root, m.mountPoint, m.source]),
      [
        ['/', '/plain', 'a b'],
        ['/', '/also plain', 'src'],
        ['/', '/x', 'src'],
        ['/r\\', '/last\t', 'src'],
      ],
    );
  });

  test('every entry gets the options of its own line, however many distinct option texts there are', () => {
    const lines = Array.from(
      { length: 40 },
      (_, i) =>
        `${i + 1} 1 0:${i} / /m${i} rw,nosuid${i % 3 === 0 ? '' : ',nodev'} - tmpfs t rw,size=${i % 20}k,x=a\\054${i % 20}`,
    );
    const infos = parseMountInfo(lines.join('\n'));
    for (const [i, m] of infos.entries()) {
      assert.deepEqual(m.mountOptions, i % 3 === 0 ? ['rw', 'nosuid'] : ['rw', 'nosuid', 'nodev']);
      assert.deepEqual(m.superOptions, ['rw', `size=${i % 20}k`, `x=a,${i % 20}`]);
    }
    // Equal texts share one list, which is frozen so no caller can change another entry's options.
    assert.equal(infos[1]?.mountOptions, infos[2]?.mountOptions);
    assert.equal(infos[3]?.superOptions, infos[23]?.superOptions);
    assert.ok(Object.isFrozen(infos[0]?.superOptions));
    assert.ok(Object.isFrozen(infos[0]?.optionalFields));
  });

  test('ignores empty lines and a missing final newline', () => {
    assert.equal(parseMountInfo('\n1 0 0:1 / / rw - a b c\n\n2 1 0:2 / /x rw - a b c').length, 2);
  });
});

describe('consistentRead', () => {
  test('returns once two consecutive reads agree', async () => {
    const reads = ['a', 'b', 'c', 'c'];
    let n = 0;
    const text = await consistentRead('/x', async () => at(reads, n++));
    assert.equal(text, 'c');
    assert.equal(n, 4);
  });

  test('gives up after the attempt limit', async () => {
    let n = 0;
    await assert.rejects(
      consistentRead('/proc/self/mountinfo', async () => String(n++), 5),
      /could not get consistent content of \/proc\/self\/mountinfo after 5 attempts/,
    );
  });
});

describe('searchMountRefs', () => {
  const infos = parseMountInfo(
    [
      '1 0 8:1 / / rw - ext4 /dev/sda1 rw',
      '2 1 8:1 /data/vol /pods/a/vol rw - ext4 /dev/sda1 rw',
      '3 1 8:1 /data/vol /pods/b/vol rw - ext4 /dev/sda1 rw',
      '4 1 0:50 / /pods/c/tmp rw - tmpfs tmpfs rw',
      '5 1 0:50 / /pods/d/tmp rw - tmpfs tmpfs rw',
    ].join('\n'),
  );

  test('finds the other bind mounts of the same directory', () => {
    assert.deepEqual(searchMountRefs(infos, '/pods/a/vol'), ['/pods/b/vol']);
    assert.deepEqual(searchMountRefs(infos, '/data/vol'), ['/pods/a/vol', '/pods/b/vol']);
    assert.deepEqual(searchMountRefs(infos, '/pods/c/tmp'), ['/pods/d/tmp']);
  });
});

describe('mountinfo of real mounts', () => {
  const weird = ['with space', 'with\ttab', 'with\nnewline', 'with\\backslash', 'all of \t\n\\ them'];

  mountTest('paths with spaces, tabs, newlines and backslashes come back exactly', async (t) => {
    const dir = await scratchDir(t);
    const targets = weird.map((name) => join(dir, name));
    for (const target of targets) {
      await mkdir(target);
      sh('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'weird source', target]);
    }
    // What the kernel prints: each special character as a 3-digit octal escape.
    const raw = rawMountInfo();
    for (const esc of ['with\\040space', 'with\\011tab', 'with\\012newline', 'with\\134backslash']) {
      assert.ok(raw.includes(`${dir}/${esc} `), `mountinfo has ${esc}`);
    }
    assert.ok(raw.includes(' weird\\040source '));

    const infos = await readMountInfo();
    for (const target of targets) {
      const entry = infos.find((m) => m.mountPoint === target);
      assert.ok(entry, `parsed entry for ${JSON.stringify(target)}`);
      assert.equal(entry.fsType, 'tmpfs');
      assert.equal(entry.source, 'weird source');
      assert.ok(entry.superOptions.includes('size=1024k'), entry.superOptions.join(','));
    }
  });

  // Older kernels printed such mount points with a "\040(deleted)" suffix (handled above, and by
  // mount-utils); Linux 6.x marks only the root field, with "//deleted". This pins down what the
  // running kernel really prints.
  mountTest(
    'a bind-mounted file whose source was deleted keeps its mount point; the root says //deleted',
    async (t) => {
      const dir = await scratchDir(t);
      const src = join(dir, 'resolv.conf.src');
      const target = join(dir, 'resolv conf');
      await writeFile(src, 'nameserver 1.1.1.1\n');
      await writeFile(target, '');
      sh('mount', ['--bind', src, target]);
      await rm(src);
      const entry = (await readMountInfo()).find((m) => m.root === `${src}//deleted`);
      assert.ok(entry, 'entry with a deleted root');
      assert.ok(entry.mountPoint === target || (entry.deleted === true && entry.mountPoint === target));
      assert.ok(isMountPointIn(await readMountInfo(), target));
    },
  );

  mountTest('the parser agrees with the whole live table', async () => {
    const parsed = await readMountInfo();
    assert.equal(parsed.length, rawMountInfo().trimEnd().split('\n').length);
    assert.ok(mountTable().some((m) => m.mountPoint === '/'));
  });
});
