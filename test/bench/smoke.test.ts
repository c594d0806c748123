// Every bench still runs: each at its --smoke size, with real mounts in the
// test's mount namespace. No timing is asserted, only that it ran to the end,
// printed its figures and left no mount behind.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe } from 'node:test';
import { benchArgs, benches } from '../../bench/run.ts';
import { mountTest } from '../helpers/mountns.ts';

function run(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
    });
    proc.stderr.on('data', (d) => {
      out += d;
    });
    proc.once('exit', (code) => resolve({ code, out }));
  });
}

describe('bench smoke', { concurrency: 3 }, () => {
  for (const b of benches) {
    mountTest(`${b.figure} (bench/${b.file} at smoke size) runs and prints its figures`, async () => {
      const { code, out } = await run(benchArgs(b, true, []));
      assert.equal(code, 0, out);
      assert.match(out, /\d+(\.\d+)? (ms|MiB|x|req)\b/, `no figure printed:\n${out}`);
      assert.doesNotMatch(out, /cleanup: \d+ mounts were left|NaN/, out);
    });
  }
});
