import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { lstat, mkdir, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import {
  type Payload,
  validatePayloadPath,
  writeAtomically,
} from '../../../src/plugins/util/atomic-writer.ts';
import { nodeFsOps } from '../../../src/volumehost/fs.ts';
import { tempDir } from '../../helpers/mountns.ts';

const hostFs = nodeFsOps();
const TS_DIR = /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/;

async function tsDirs(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => TS_DIR.test(n));
}

async function visible(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => !n.startsWith('..')).sort();
}

function file(data: string, mode = 0o644) {
  return { data, mode };
}

async function volume(t: TestContext): Promise<string> {
  const root = await tempDir(t, 'podvol-aw-');
  const dir = join(root, 'vol');
  await mkdir(dir);
  return dir;
}

describe('writeAtomically layout', () => {
  test('first write: timestamped dir, ..data link, relative user-visible links', async (t) => {
    const dir = await volume(t);
    const now = () => new Date(Date.UTC(2024, 4, 1, 10, 0, 0));
    const res = await writeAtomically(
      { fs: hostFs, path: dir },
      { key1: file('one'), 'conf/app.yaml': file('a: 1'), 'a/b/c': file('deep') },
      { now },
    );
    assert.deepEqual(res, { changed: true });

    const [ts, ...others] = await tsDirs(dir);

    assert.ok(ts !== undefined, 'a timestamped directory');
    assert.deepEqual(others, []);
    assert.match(ts, /^\.\.2024_05_01_10_00_00\.\d+$/);
    assert.equal((await stat(join(dir, ts))).mode & 0o7777, 0o755);
    assert.equal(await readlink(join(dir, '..data')), ts);
    assert.deepEqual(await visible(dir), ['a', 'conf', 'key1']);
    assert.equal(await readlink(join(dir, 'key1')), '..data/key1');
    assert.equal(await readlink(join(dir, 'conf')), '..data/conf');
    assert.equal(await readlink(join(dir, 'a')), '..data/a');
    assert.equal(await readFile(join(dir, 'a/b/c'), 'utf8'), 'deep');
    assert.equal(await readFile(join(dir, 'conf/app.yaml'), 'utf8'), 'a: 1');
    assert.deepEqual(await readdir(join(dir, ts, 'a')), ['b']);
    await assert.rejects(lstat(join(dir, '..data_tmp')), { code: 'ENOENT' });
  });

  test('file modes are exact whatever the umask', async (t) => {
    const dir = await volume(t);
    const old = process.umask(0o077);
    t.after(() => process.umask(old));
    await writeAtomically(
      { fs: hostFs, path: dir },
      new Map([
        ['ro', file('x', 0o400)],
        ['rw', file('x', 0o644)],
        ['private', file('x', 0o600)],
        ['open/nested', file('x', 0o666)],
      ]),
    );
    const mode = async (p: string) => (await stat(join(dir, p))).mode & 0o7777;
    assert.equal(await mode('ro'), 0o400);
    assert.equal(await mode('rw'), 0o644);
    assert.equal(await mode('private'), 0o600);
    assert.equal(await mode('open/nested'), 0o666);
  });

  test('binary data is written byte for byte', async (t) => {
    const dir = await volume(t);
    const bytes = new Uint8Array([0, 255, 10, 13, 128]);
    await writeAtomically({ fs: hostFs, path: dir }, { bin: { data: bytes, mode: 0o644 } });
    assert.deepEqual(new Uint8Array(await readFile(join(dir, 'bin'))), bytes);
  });

  test('fsUser chowns the file, leaving the group alone', {
    skip: process.getuid?.() !== 0 && 'needs root',
  }, async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { token: { data: 't', mode: 0o600, fsUser: 4321 } });
    const st = await stat(join(dir, 'token'));
    assert.equal(st.uid, 4321);
    assert.equal(st.gid, process.getgid?.());
  });

  test('a missing target directory is an error', async (t) => {
    const dir = await volume(t);
    await assert.rejects(
      writeAtomically(
        { fs: hostFs, path: join(dir, 'nope') },
        { a: file('x') },
        { logContext: 'pod ns/p volume v' },
      ),
      {
        message: `pod ns/p volume v: target directory ${join(dir, 'nope')} does not exist: ENOENT: no such file or directory, stat '${join(dir, 'nope')}'`,
      },
    );
  });
});

describe('writeAtomically updates', () => {
  test('identical content is not rewritten', async (t) => {
    const dir = await volume(t);
    const payload: Payload = { a: file('1'), 'd/b': file('2') };
    await writeAtomically({ fs: hostFs, path: dir }, payload);
    const [ts] = await tsDirs(dir);
    assert.ok(ts !== undefined, 'a timestamped directory');
    const ino = (await stat(join(dir, ts))).ino;
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, payload), { changed: false });
    assert.deepEqual(await tsDirs(dir), [ts]);
    assert.equal((await stat(join(dir, ts))).ino, ino);
    assert.equal(await readlink(join(dir, '..data')), ts);
  });

  test('a mode-only change does not trigger a rewrite (as in kubelet)', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1', 0o644) });
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, { a: file('1', 0o600) }), {
      changed: false,
    });
    assert.equal((await stat(join(dir, 'a'))).mode & 0o777, 0o644);
  });

  test('missing user-visible links are recreated even without a rewrite (k/k #121472)', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1'), 'd/b': file('2') });
    const [ts] = await tsDirs(dir);
    assert.ok(ts !== undefined, 'a timestamped directory');
    await rm(join(dir, 'a'));
    await rm(join(dir, 'd'));
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, { a: file('1'), 'd/b': file('2') }), {
      changed: false,
    });
    assert.deepEqual(await tsDirs(dir), [ts]);
    assert.equal(await readlink(join(dir, 'a')), '..data/a');
    assert.equal(await readFile(join(dir, 'd/b'), 'utf8'), '2');
  });

  test('changed content goes to a new ts dir and the old one is removed', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1') });
    const [first] = await tsDirs(dir);
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, { a: file('2') }), { changed: true });
    const [second, ...rest] = await tsDirs(dir);
    assert.deepEqual(rest, []);
    assert.notEqual(second, first);
    assert.equal(await readlink(join(dir, '..data')), second);
    assert.equal(await readFile(join(dir, 'a'), 'utf8'), '2');
  });

  test('removed keys are pruned at the top level only', async (t) => {
    const dir = await volume(t);
    await writeAtomically(
      { fs: hostFs, path: dir },
      {
        a: file('1'),
        b: file('2'),
        'dir/x': file('3'),
        'dir/y': file('4'),
        'gone/z': file('5'),
      },
    );
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, { a: file('1'), 'dir/x': file('3') }), {
      changed: true,
    });
    assert.deepEqual(await visible(dir), ['a', 'dir']);
    const [ts] = await tsDirs(dir);
    assert.ok(ts !== undefined, 'a timestamped directory');
    assert.deepEqual((await readdir(join(dir, ts, 'dir'))).sort(), ['x']);
    await assert.rejects(readFile(join(dir, 'dir/y')), { code: 'ENOENT' });
    // The user-visible entry "dir" is a link into ..data, untouched by pruning.
    assert.equal(await readlink(join(dir, 'dir')), '..data/dir');
  });

  test('an emptied payload prunes everything', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1'), 'b/c': file('2') });
    assert.deepEqual(await writeAtomically({ fs: hostFs, path: dir }, {}), { changed: true });
    assert.deepEqual(await visible(dir), []);
    assert.equal((await tsDirs(dir)).length, 1);
  });

  test('a file can become a directory', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1') });
    await writeAtomically({ fs: hostFs, path: dir }, { 'a/b': file('2') });
    assert.equal(await readFile(join(dir, 'a/b'), 'utf8'), '2');
  });

  test('setPerms sees the new ts dir before it is published', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1') });
    const calls: string[] = [];
    await writeAtomically(
      { fs: hostFs, path: dir },
      { a: file('2') },
      {
        setPerms: async (tsDirName) => {
          calls.push(tsDirName);
          assert.match(tsDirName, TS_DIR);
          assert.equal(await readFile(join(dir, tsDirName, 'a'), 'utf8'), '2');
          assert.notEqual(await readlink(join(dir, '..data')), tsDirName);
        },
      },
    );
    assert.deepEqual(calls, [await readlink(join(dir, '..data'))]);
  });

  test('a failing setPerms publishes nothing and leaves no ts dir behind', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1') });
    const [ts] = await tsDirs(dir);
    assert.ok(ts !== undefined, 'a timestamped directory');
    await assert.rejects(
      writeAtomically(
        { fs: hostFs, path: dir },
        { a: file('2') },
        { logContext: 'ctx', setPerms: async () => Promise.reject(new Error('boom')) },
      ),
      { message: 'ctx: error applying ownership settings: boom' },
    );
    assert.deepEqual(await tsDirs(dir), [ts]);
    assert.equal(await readFile(join(dir, 'a'), 'utf8'), '1');
  });

  test('a ..data_tmp left by a crash does not block the next write', async (t) => {
    const dir = await volume(t);
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('1') });
    await symlink('..2020_01_01_00_00_00.1', join(dir, '..data_tmp'));
    await writeAtomically({ fs: hostFs, path: dir }, { a: file('2') });
    assert.equal(await readFile(join(dir, 'a'), 'utf8'), '2');
    await assert.rejects(lstat(join(dir, '..data_tmp')), { code: 'ENOENT' });
  });

  test('a ..data link pointing out of the volume is refused, not followed', async (t) => {
    const dir = await volume(t);
    await mkdir(join(dir, '../outside'));
    await writeFile(join(dir, '../outside/keep'), 'x');
    await symlink('../outside', join(dir, '..data'));
    await assert.rejects(
      writeAtomically({ fs: hostFs, path: dir }, { a: file('1') }),
      /points to unexpected target "\.\.\/outside"/,
    );
    assert.equal(await readFile(join(dir, '../outside/keep'), 'utf8'), 'x');
  });
});

describe('payload path validation', () => {
  const cases: Array<[string, string]> = [
    ['', 'invalid path: must not be empty: ""'],
    ['/etc/passwd', 'invalid path: must be relative path: /etc/passwd'],
    ['a/../../b', "invalid path: must not contain '..': a/../../b"],
    ['..', "invalid path: must not contain '..': .."],
    ['..data', "invalid path: must not start with '..': ..data"],
    ['..foo/bar', "invalid path: must not start with '..': ..foo/bar"],
    [`dir/${'x'.repeat(256)}`, 'invalid path: filenames must be less than or equal to 255 characters'],
    [`${'é'.repeat(128)}`, 'invalid path: filenames must be less than or equal to 255 characters'],
    [`${'d/'.repeat(2048)}x`, 'invalid path: must be less than or equal to 4096 characters'],
  ];
  for (const [p, message] of cases) {
    test(`rejects ${JSON.stringify(p.length > 40 ? `${p.slice(0, 40)}…` : p)}`, async (t) => {
      assert.throws(() => validatePayloadPath(p), { message });
      const dir = await volume(t);
      await assert.rejects(writeAtomically({ fs: hostFs, path: dir }, { ok: file('1'), [p]: file('2') }), {
        message: `invalid payload: ${message}`,
      });
      assert.deepEqual(await readdir(dir), []);
    });
  }

  test('accepts the legal edge cases', () => {
    for (const ok of [
      'a',
      'a/b/c',
      'a..b',
      '.hidden',
      'x/..y',
      `${'x'.repeat(255)}`,
      `${'d/'.repeat(2047)}x`,
    ]) {
      assert.doesNotThrow(() => validatePayloadPath(ok), ok);
    }
  });
});

describe('concurrent readers', () => {
  test('never see a mix of old and new files', { timeout: 120_000 }, async (t) => {
    const dir = await volume(t);
    const files = ['a', 'b', 'nested/deep/c', 'nested/d'];
    const padding = 'x'.repeat(32 * 1024);
    const payload = (gen: number): Payload =>
      Object.fromEntries(files.map((f) => [f, file(`gen-${gen}\n${f}\n${padding}`)]));
    // The first write creates the user-visible links; readers start after it.
    await writeAtomically({ fs: hostFs, path: dir }, payload(0));

    const reader = fork(new URL('./fixtures/atomic-reader.ts', import.meta.url), [dir, ...files], {
      execArgv: [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    t.after(() => reader.kill());
    const violations: string[] = [];
    const seen = new Set<string>();
    let waiter: (() => void) | undefined;
    let snapshots = 0;
    const done = new Promise<void>((resolve) =>
      reader.on('message', (m: { seen?: string; violation?: string; done?: number }) => {
        if (m.violation) violations.push(m.violation);
        if (m.seen) {
          seen.add(m.seen);
          waiter?.();
        }
        if (m.done !== undefined) {
          snapshots = m.done;
          resolve();
        }
      }),
    );
    const waitUntilSeen = (gen: number) =>
      new Promise<void>((resolve) => {
        waiter = () => seen.has(`gen-${gen}`) && resolve();
        waiter();
      });

    const generations = 150;
    for (let gen = 1; gen <= generations; gen++) {
      await writeAtomically({ fs: hostFs, path: dir }, payload(gen));
      // Keep writer and reader interleaved: each generation is observed before the next swap.
      await waitUntilSeen(gen);
    }
    reader.send('stop');
    await done;

    assert.deepEqual(violations, []);
    for (let gen = 1; gen <= generations; gen++)
      assert.ok(seen.has(`gen-${gen}`), `generation ${gen} observed`);
    assert.ok(snapshots >= generations);
    assert.equal((await tsDirs(dir)).length, 1);
  });
});
