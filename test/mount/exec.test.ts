import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type CommandRunner,
  createExecaRunner,
  createThreadRunner,
  type RunResult,
} from '../../src/mount/exec.ts';

// The thread runner must keep the execa runner's contract exactly: the mount
// layer judges commands by these fields.
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

describe('command runners', () => {
  test('the thread runner gives what the execa runner gives: exit code, interleaved output, spawn error, timeout, signal, C locale, argv without a shell', async () => {
    const thread = createThreadRunner();
    try {
      const viaThread = await contract(thread);
      assert.deepEqual(viaThread, await contract(createExecaRunner()));
      assert.deepEqual(viaThread.ok, {
        exitCode: 3,
        signal: undefined,
        output: 'out\nerr',
        timedOut: false,
        spawnErrorCode: undefined,
      });
      assert.equal(viaThread.missing.spawnErrorCode, 'ENOENT');
      assert.equal(viaThread.timedOut.timedOut, true);
      assert.equal(viaThread.killed.signal, 'SIGKILL');
      assert.equal(viaThread.locale, 'C/C');
      assert.equal(viaThread.argv, 'a b|$(x)|;|');
    } finally {
      await thread.close();
    }
  });

  test('exited settles when the process is gone, also after a timed-out result', async () => {
    const thread = createThreadRunner();
    try {
      // TERM is ignored (exec keeps that), so the process lives on until the SIGKILL after the grace.
      const r = await thread({ file: 'sh', args: ['-c', 'trap "" TERM; exec sleep 30'], timeoutMs: 200 });
      assert.equal(r.timedOut, true);
      assert.ok(r.exited);
      await r.exited;
    } finally {
      await thread.close();
    }
  });

  test('many commands at once each get their own result', async () => {
    const thread = createThreadRunner();
    try {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          thread({ file: 'sh', args: ['-c', `echo ${i}; exit ${i % 3}`], timeoutMs: 30_000 }),
        ),
      );
      assert.deepEqual(
        results.map((r) => [r.output, r.exitCode]),
        Array.from({ length: 20 }, (_, i) => [String(i), i % 3]),
      );
    } finally {
      await thread.close();
    }
  });
});
