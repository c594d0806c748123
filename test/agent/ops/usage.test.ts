import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from './cli.ts';

test('a usage error is one line on stderr and exit code 2, for every command', async () => {
  for (const args of [['plan'], ['status', '--bogus'], ['nosuch'], ['run', '--listen']]) {
    const r = await runCli(args);
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.stdout, '', args.join(' '));
    assert.match(r.stderr, /^podvol: [^\n]+ \(run podvol --help for usage\)\n$/, args.join(' '));
  }
});
