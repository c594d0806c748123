// The mount table read once per change (src/mount/mount-table.ts): the
// kernel's change signal on real mounts, and what callers get and cost with a
// scripted change source and a counting reader.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { type MountChanges, MountTable, nativeWatch } from '../../src/mount/mount-table.ts';
import { PROC_MOUNTINFO } from '../../src/mount/mountinfo.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

const LINE = (id: number, mp: string) => `${id} 1 0:${id} / ${mp} rw - tmpfs tmpfs rw\n`;

/** A mount table text the test edits, a reader that counts its reads, and a change source the test fires. */
function scripted(initial: string) {
  let text = initial;
  let pending = false;
  const reads: string[] = [];
  /** The reads held by hold(): each returns the text as it was when it began, missing a change made while held. */
  let held: (() => void)[] | undefined;
  const changes: MountChanges = {
    changed() {
      const was = pending;
      pending = false;
      return was;
    },
  };
  return {
    table: new MountTable({
      path: '/proc/self/mountinfo',
      watch: () => changes,
      reader: async () => {
        const atStart = text;
        if (held) await new Promise<void>((r) => held?.push(r));
        reads.push(atStart);
        return atStart;
      },
    }),
    reads,
    /** A mount or unmount: the text changes and the kernel's counter moves. */
    change(next: string) {
      text = next;
      pending = true;
    },
    hold() {
      held = [];
    },
    release() {
      const h = held ?? [];
      held = undefined;
      for (const r of h) r();
    },
  };
}

const points = (t: readonly { mountPoint: string }[]) => t.map((m) => m.mountPoint);

describe('the mount table, read once per change', () => {
  test('with no change, any number of callers share the first read', async () => {
    const s = scripted(LINE(1, '/a'));
    const concurrent = await Promise.all(Array.from({ length: 20 }, () => s.table.list()));
    for (let i = 0; i < 20; i++) await s.table.list();
    assert.equal(s.reads.length, 1);
    assert.ok(concurrent.every((t) => t === concurrent[0]));
    assert.deepEqual(points(await s.table.list()), ['/a']);
  });

  test('a caller after a change gets the new table, from one read shared by all who ask', async () => {
    const s = scripted(LINE(1, '/a'));
    await s.table.list();
    s.change(LINE(1, '/a') + LINE(2, '/b'));
    const after = await Promise.all([s.table.list(), s.table.list(), s.table.list()]);
    assert.equal(s.reads.length, 2);
    for (const t of after) assert.deepEqual(points(t), ['/a', '/b']);
  });

  test('a caller arriving while a read runs shares it when nothing changed since it began', async () => {
    const s = scripted(LINE(1, '/a'));
    s.hold();
    const first = s.table.list();
    const second = s.table.list();
    s.release();
    assert.equal(await first, await second);
    assert.equal(s.reads.length, 1);
  });

  test('a change while a read runs: a caller after it waits for a read begun after the change', async () => {
    const s = scripted(LINE(1, '/a'));
    s.hold();
    const before = s.table.list();
    // The read above has begun; the mount below may or may not be in what it returns.
    s.change(LINE(1, '/a') + LINE(2, '/b'));
    const after = s.table.list();
    s.release();
    assert.deepEqual(points(await after), ['/a', '/b']);
    // The first read saw the change by polling after it: maybe torn, so it was read again too.
    assert.deepEqual(points(await before), ['/a', '/b']);
  });

  test('a change during a read makes that read be taken again, not cached', async () => {
    const s = scripted(LINE(1, '/a'));
    s.hold();
    const p = s.table.list();
    await new Promise((r) => setImmediate(r));
    s.change(LINE(2, '/b'));
    s.release();
    // The held read returned the table from before the change; the poll after it said so.
    assert.deepEqual(points(await p), ['/b']);
    assert.equal(s.reads.length, 2);
    await s.table.list();
    assert.equal(s.reads.length, 2);
  });

  test('a table that changes during every read is given up on, as consistentRead does', async () => {
    let reads = 0;
    const churning = new MountTable({
      watch: () => ({ changed: () => true }),
      reader: async () => {
        reads++;
        return LINE(1, '/a');
      },
    });
    await assert.rejects(churning.list(), /could not get consistent content .* after 10 attempts/);
    assert.equal(reads, 10);
  });

  test('callers share one table and cannot change it for the others', async () => {
    const s = scripted(LINE(1, '/a'));
    const t = (await s.table.list()) as unknown as { mountPoint: string }[];
    assert.throws(() => t.push({ mountPoint: '/x' }), TypeError);
    assert.throws(() => {
      (t[0] as { mountPoint: string }).mountPoint = '/x';
    }, TypeError);
  });

  test('without a change source (no addon, or not a /proc file), every call reads until two reads agree', async () => {
    let reads = 0;
    const table = new MountTable({
      watch: () => undefined,
      reader: async () => {
        reads++;
        return LINE(1, '/a');
      },
    });
    await table.list();
    await table.list();
    assert.equal(reads, 4);
    assert.equal(table.watched, false);
  });

  test('the native watch is absent when the addon is missing or the file is not on /proc', async (t) => {
    const missing = nativeWatch(new URL('file:///nonexistent/mountwatch.node'));
    assert.equal(missing(PROC_MOUNTINFO), undefined);
    const dir = await tempDir(t);
    const plain = join(dir, 'mountinfo');
    await execa('cp', [PROC_MOUNTINFO, plain]);
    assert.equal(nativeWatch()(plain), undefined);
    assert.equal(new MountTable({ path: plain }).watched, false);
  });
});

// A fresh namespace of its own: the other test files mount in the test run's
// namespace meanwhile, and every one of their mounts is a change here too.
const ALONE = `
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
const [addon, dir] = process.argv.slice(1);
const w = createRequire(import.meta.url)(addon);
const h = w.watch('/proc/self/mountinfo');
const seen = { quiet: [w.changed(h), w.changed(h)] };
execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'podvol-watch', dir]);
seen.mount = [w.changed(h), w.changed(h)];
execFileSync('umount', [dir]);
seen.umount = [w.changed(h), w.changed(h)];
console.log(JSON.stringify(seen));
`;

describe('the kernel signals mount table changes (native/mountwatch)', () => {
  mountTest('once per real tmpfs mount and umount, and not while nothing changes', async (t) => {
    const dir = await tempDir(t);
    const addon = new URL('../../native/mountwatch/build/mountwatch.node', import.meta.url).pathname;
    const r = await execa(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        process.execPath,
        '--input-type=module',
        '-e',
        ALONE,
        addon,
        dir,
      ],
      { timeout: 30_000 },
    );
    assert.deepEqual(JSON.parse(r.stdout), {
      quiet: [false, false],
      mount: [true, false],
      umount: [true, false],
    });
  });

  mountTest(
    'a caller after a real mount gets the table with it, after the umount the table without',
    async (t) => {
      const dir = await tempDir(t);
      const target = join(dir, 'm');
      await execa('mkdir', [target]);
      let reads = 0;
      const table = new MountTable({
        reader: (p) => {
          reads++;
          return readFile(p, 'utf8');
        },
      });
      assert.equal(table.watched, true);
      assert.ok(!points(await table.list()).includes(target));
      await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'podvol-watch', target]);
      assert.ok(points(await table.list()).includes(target));
      await execa('umount', [target]);
      assert.ok(!points(await table.list()).includes(target));
      // Each answer came from a read begun after the change (other test files' churn may add more).
      assert.ok(reads >= 3);
    },
  );
});
