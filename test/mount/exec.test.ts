import assert from 'node:assert/strict';
import { constants } from 'node:os';
import { describe, test } from 'node:test';
import { loadAddon } from '../../src/addon.ts';
import {
  type CommandRunner,
  createExecaRunner,
  createSpawnRunner,
  createThreadRunner,
  type RunResult,
} from '../../src/mount/exec.ts';

// The spawn runner (posix_spawn through native/spawn, what the daemon uses)
// and the thread runner (its fallback) must keep the execa runner's contract
// exactly: the mount layer judges commands by these fields.
const withoutExited = ({ exited: _, ...r }: RunResult) => r;

async function contract(run: CommandRunner) {
  return {
    ok: withoutExited(
      await run({ file: 'sh', args: ['-c', 'echo out; echo err >&2; exit 3'], timeoutMs: 10_000 }),
    ),
    missing: withoutExited(await run({ file: 'podvol-no-such-binary', args: [], timeoutMs: 10_000 })),
    timedOut: withoutExited(await run({ file: 'sleep', args: ['30'], timeoutMs: 200 })),
    killed: withoutExited(await run({ file: 'sh', args: ['-c', 'kill -9 $$'], timeoutMs: 10_000 })),
    locale: (await run({ file: 'sh', args: ['-c', 'echo "$LC_ALL/$LANG"'], timeoutMs: 10_000 })).output,
    argv: (await run({ file: 'printf', args: ['%s|', 'a b', '$(x)', ';'], timeoutMs: 10_000 })).output,
  };
}

/** Each runner under test, with what ends it. */
function runners(): { name: string; make: () => { run: CommandRunner; close: () => Promise<void> } }[] {
  return [
    {
      name: 'spawn runner',
      make: () => {
        const run = createSpawnRunner();
        // The addon is built by npm ci on every machine the tests run on; its absence is a failure here.
        assert.ok(run, 'native/spawn is not built (or the kernel has no pidfds)');
        return { run, close: async () => {} };
      },
    },
    {
      name: 'thread runner',
      make: () => {
        const run = createThreadRunner();
        return { run, close: () => run.close() };
      },
    },
  ];
}

describe('command runners', () => {
  for (const { name, make } of runners()) {
    describe(name, () => {
      test('gives what the execa runner gives: exit code, interleaved output, spawn error, timeout, signal, C locale, argv without a shell', async () => {
        const { run, close } = make();
        try {
          const got = await contract(run);
          assert.deepEqual(got, await contract(createExecaRunner()));
          assert.deepEqual(got.ok, {
            exitCode: 3,
            signal: undefined,
            output: 'out\nerr',
            timedOut: false,
            spawnErrorCode: undefined,
          });
          assert.equal(got.missing.spawnErrorCode, 'ENOENT');
          assert.equal(got.timedOut.timedOut, true);
          assert.equal(got.killed.signal, 'SIGKILL');
          assert.equal(got.locale, 'C/C');
          assert.equal(got.argv, 'a b|$(x)|;|');
        } finally {
          await close();
        }
      });

      test('exited settles when the process is gone, also after a timed-out result', async () => {
        const { run, close } = make();
        try {
          // TERM is ignored (exec keeps that), so the process lives on until the SIGKILL after the grace.
          const r = await run({ file: 'sh', args: ['-c', 'trap "" TERM; exec sleep 30'], timeoutMs: 200 });
          assert.equal(r.timedOut, true);
          assert.equal(r.signal, 'SIGKILL');
          assert.ok(r.exited);
          await r.exited;
        } finally {
          await close();
        }
      });

      test('many commands at once each get their own result', async () => {
        const { run, close } = make();
        try {
          const results = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              run({ file: 'sh', args: ['-c', `echo ${i}; exit ${i % 3}`], timeoutMs: 30_000 }),
            ),
          );
          assert.deepEqual(
            results.map((r) => [r.output, r.exitCode]),
            Array.from({ length: 20 }, (_, i) => [String(i), i % 3]),
          );
        } finally {
          await close();
        }
      });
    });
  }

  test('the spawn runner reports a child that exits while a grandchild still holds its output open, with what the child wrote', async () => {
    // A FUSE mount helper that daemonizes leaves such a grandchild; waiting for the end of the output would wait for it.
    const run = createSpawnRunner();
    assert.ok(run);
    const r = await run({
      file: 'sh',
      args: ['-c', 'echo before; sleep 30 & echo after'],
      timeoutMs: 10_000,
    });
    assert.equal(r.timedOut, false);
    assert.equal(r.exitCode, 0);
    assert.equal(r.output, 'before\nafter');
  });

  test('the spawn runner starts children with default signal actions and no descriptor but stdin, stdout and stderr', async () => {
    const run = createSpawnRunner();
    assert.ok(run);
    // Node ignores SIGPIPE; a child must not inherit that (SigIgn is the ignored set, in hex).
    const ign = await run({ file: 'sh', args: ['-c', 'grep SigIgn /proc/self/status'], timeoutMs: 10_000 });
    assert.match(ign.output, /^SigIgn:\s+0+$/);
    const fds = await run({ file: 'ls', args: ['/proc/self/fd'], timeoutMs: 10_000 });
    // ls itself opens one directory to read the list.
    assert.deepEqual(
      fds.output
        .split('\n')
        .map(Number)
        .filter((fd) => fd > 3),
      [],
    );
    const stdin = await run({ file: 'readlink', args: ['/proc/self/fd/0'], timeoutMs: 10_000 });
    assert.equal(stdin.output, '/dev/null');
  });

  test('native/spawn: a kill right after start, before the addon thread may have started the child, still ends it', async () => {
    type Addon = {
      start(
        f: string,
        a: string[],
        e: string[],
        done: (code: number | null, sig: number | null) => void,
      ): unknown;
      kill(h: unknown, sig: number): boolean;
    };
    const addon = loadAddon<Addon>('spawn');
    const results: Promise<{ code: number | null; sig: number | null }>[] = [];
    // Several in a row, killed in the same tick as their start: most (if not all) before the thread has spawned.
    for (let i = 0; i < 20; i++) {
      results.push(
        new Promise((resolve) => {
          const h = addon.start('sleep', ['sleep', '30'], [], (code, sig) => resolve({ code, sig }));
          assert.equal(addon.kill(h, constants.signals.SIGKILL), true);
        }),
      );
    }
    for (const r of await Promise.all(results))
      assert.deepEqual(r, { code: null, sig: constants.signals.SIGKILL });
  });

  test('without the addon there is no spawn runner (the daemon then starts processes from the spawning thread)', () => {
    assert.equal(createSpawnRunner(new URL('file:///nonexistent/spawn.node')), undefined);
  });
});
