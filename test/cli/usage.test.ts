// Usage errors are one line on stderr and exit code 2, whatever the command.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../agent/ops/cli.ts';

test('a usage error is one line on stderr, exit code 2', async () => {
  const cases: [string[], RegExp][] = [
    [['run', '--bogus'], /unknown option '--bogus'/],
    [['bogus'], /unknown command 'bogus'/],
    [['plan'], /required option '-f, --filename <file>' not specified/],
    [['run', '--sync-frequency', '1'], /invalid duration "1": missing unit/],
    [['run', '--listen', 'nowhere'], /--listen/],
    [['status', '-o', 'yaml'], /Allowed choices are/],
    [['run'], /nothing to serve/],
  ];
  for (const [args, message] of cases) {
    const r = await runCli(args);
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.stdout, '', args.join(' '));
    assert.match(r.stderr, /^podvol: [^\n]+ \(run podvol --help for usage\)\n$/, args.join(' '));
    assert.match(r.stderr, message, args.join(' '));
  }
});

test('-v and --version print what podvol version prints', async () => {
  const version = await runCli(['version']);
  assert.match(version.stdout, /^podvol \d+\.\d+\.\d+ \(node v\d+/);
  for (const flag of ['-v', '--version']) {
    const r = await runCli([flag]);
    assert.equal(r.code, 0, flag);
    assert.equal(r.stdout, version.stdout, flag);
  }
});

test("mounts and wait --help describe --runtime-socket without run's '' rule", async () => {
  for (const cmd of ['mounts', 'wait']) {
    const r = await runCli([cmd, '--help']);
    assert.match(r.stdout, /--runtime-socket <path>\s+the runtime API's unix socket/, cmd);
    assert.doesNotMatch(r.stdout, /disables it/, cmd);
  }
  assert.match(
    (await runCli(['run', '--help'])).stdout,
    /--runtime-socket <path>\s+the runtime API's unix socket \(''\s+disables it\)/,
  );
});

test('every --help is wrapped to at most 100 columns, run with its descriptions in one column', async () => {
  for (const cmd of [[], ['run'], ['status'], ['plan'], ['drain'], ['mounts'], ['wait'], ['version']]) {
    const r = await runCli([...cmd, '--help']);
    assert.equal(r.code, 0, cmd.join(' '));
    const long = r.stdout.split('\n').filter((l) => l.length > 100);
    assert.deepEqual(long, [], `podvol ${cmd.join(' ')} --help`);
  }
  const run = (await runCli(['run', '--help'])).stdout;
  // A flag wider than the column is on a line of its own, its description below it in the column.
  assert.match(
    run,
    /\n {2}--authorization-webhook-cache-authorized-ttl <duration>\n {30,}how long allowed SubjectAccessReview\s/,
  );
  assert.match(run, /\n {2}--root-dir <dir> +root directory \(kubelet layout below it\)\n/);
});
