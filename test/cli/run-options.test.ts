// `podvol run`'s options as an operator gives them: kubelet's durations and
// --hostname-override, a --config file whose keys mirror the flags, and the
// precedence flag > PODVOL_* variable > config file > default. The real run
// command is parsed; only its action is replaced.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { type TestContext, test } from 'node:test';
import { CommanderError } from 'commander';
import { buildProgram } from '../../src/cli.ts';
import { repoRoot, runCli } from '../agent/ops/cli.ts';
import { tempDir } from '../helpers/mountns.ts';
import { must } from '../helpers/must.ts';

const envNames = [
  'PODVOL_ROOT_DIR',
  'PODVOL_RUNTIME_SOCKET',
  'PODVOL_NODE_NAME',
  'PODVOL_SYNC_FREQUENCY',
  'PODVOL_CONFIG',
  'PODVOL_LOG_FORMAT',
  'PODVOL_VOLUME_STATS_AGG_PERIOD',
];

/** Parses `podvol run <args>` and returns the flags the action would get; throws a usage error's message. */
async function parseRun(t: TestContext, args: string[], env: Record<string, string> = {}) {
  const saved = Object.fromEntries(envNames.map((k) => [k, process.env[k]]));
  t.after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  for (const k of envNames) delete process.env[k];
  Object.assign(process.env, env);
  const program = buildProgram();
  let errors = '';
  program.configureOutput({ writeErr: (s) => (errors += s), outputError: (s, w) => w(s) });
  for (const c of program.commands)
    c.configureOutput({ writeErr: (s) => (errors += s), outputError: (s, w) => w(s) });
  const run = must(
    program.commands.find((c) => c.name() === 'run'),
    'the run command',
  );
  let flags: Record<string, unknown> | undefined;
  run.action((f: Record<string, unknown>) => {
    flags = f;
  });
  try {
    await program.parseAsync(['node', 'podvol', 'run', ...args]);
  } catch (err) {
    if (err instanceof CommanderError) throw new Error(errors.trim());
    throw err;
  }
  return must(flags, 'flags');
}

test("--volume-stats-agg-period is kubelet's flag: 1m0s by default, a duration, 0s disables", async (t) => {
  assert.equal((await parseRun(t, [])).volumeStatsAggPeriod, 60_000);
  assert.equal((await parseRun(t, ['--volume-stats-agg-period', '5m'])).volumeStatsAggPeriod, 300_000);
  assert.equal((await parseRun(t, ['--volume-stats-agg-period', '0s'])).volumeStatsAggPeriod, 0);
  assert.equal(
    (await parseRun(t, [], { PODVOL_VOLUME_STATS_AGG_PERIOD: '30s' })).volumeStatsAggPeriod,
    30_000,
  );
  await assert.rejects(parseRun(t, ['--volume-stats-agg-period', '60']), /missing unit/);
  await assert.rejects(parseRun(t, ['--volume-stats-agg-period', '-1m']), /invalid duration|at least/);
});

test('--sync-frequency takes kubelet durations (1m0s, 90s) and refuses a bare number', async (t) => {
  assert.equal((await parseRun(t, [])).syncFrequency, 60_000);
  assert.equal((await parseRun(t, ['--sync-frequency', '1m0s'])).syncFrequency, 60_000);
  assert.equal((await parseRun(t, ['--sync-frequency', '90s'])).syncFrequency, 90_000);
  assert.equal((await parseRun(t, [], { PODVOL_SYNC_FREQUENCY: '2m' })).syncFrequency, 120_000);
  await assert.rejects(parseRun(t, ['--sync-frequency', '60']), /invalid duration "60": missing unit/);
  await assert.rejects(parseRun(t, ['--sync-frequency', '0s']), /--sync-frequency must be at least/);
});

test("--hostname-override is kubelet's --node-name: trimmed, lower-cased; both disagreeing is an error", async (t) => {
  assert.equal((await parseRun(t, [])).nodeName, hostname().trim().toLowerCase());
  assert.equal((await parseRun(t, ['--hostname-override', ' Node-1.Example '])).nodeName, 'node-1.example');
  assert.equal(
    (await parseRun(t, ['--hostname-override', 'node-1', '--node-name', 'node-1'])).nodeName,
    'node-1',
  );
  await assert.rejects(
    parseRun(t, ['--hostname-override', 'node-1', '--node-name', 'node-2']),
    /--hostname-override node-1 and --node-name node-2 disagree/,
  );
});

test('--config FILE: keys mirror the flags in either spelling; flags, then PODVOL_* variables, win', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'config.yaml');
  await writeFile(
    file,
    [
      'rootDir: /from/config',
      'node-name: config-node',
      'syncFrequency: 1m30s',
      'podManifestPath: /etc/podvol/pods',
      'listen: 0.0.0.0:10281',
      'systemdScope: "off"',
      'logLevel: debug',
    ].join('\n'),
  );
  const fromFile = await parseRun(t, ['--config', file]);
  assert.equal(fromFile.rootDir, '/from/config');
  assert.equal(fromFile.nodeName, 'config-node');
  assert.equal(fromFile.syncFrequency, 90_000);
  assert.equal(fromFile.podManifestPath, '/etc/podvol/pods');
  assert.deepEqual(fromFile.listen, { host: '0.0.0.0', port: 10281 });
  assert.equal(fromFile.systemdScope, 'off');
  assert.equal(fromFile.logLevel, 'debug');

  const flagsWin = await parseRun(
    t,
    ['--config', file, '--root-dir', '/from/flag', '--sync-frequency', '5s'],
    {
      PODVOL_NODE_NAME: 'env-node',
    },
  );
  assert.equal(flagsWin.rootDir, '/from/flag');
  assert.equal(flagsWin.syncFrequency, 5000);
  assert.equal(flagsWin.nodeName, 'env-node');
  assert.equal(flagsWin.logLevel, 'debug');

  // PODVOL_CONFIG names the file too; a hostnameOverride key works like the flag.
  await writeFile(file, 'hostnameOverride: Box-7\n');
  assert.equal((await parseRun(t, [], { PODVOL_CONFIG: file })).nodeName, 'box-7');
});

test("--config FILE: relative paths are relative to the file's directory, as kubelet resolves them", async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'config.yaml');
  await writeFile(
    file,
    ['rootDir: state', 'podManifestPath: ./pods', 'kubeconfig: ../kubeconfig', 'runtimeSocket: ""'].join(
      '\n',
    ),
  );
  const fromFile = await parseRun(t, ['--config', file]);
  assert.equal(fromFile.rootDir, join(dir, 'state'));
  assert.equal(fromFile.podManifestPath, join(dir, 'pods'));
  assert.equal(fromFile.kubeconfig, join(dir, '../kubeconfig'));
  assert.equal(fromFile.runtimeSocket, '', 'an empty value still disables the socket');
  // On the command line a relative path is the operator's, relative to the working directory.
  assert.equal((await parseRun(t, ['--config', file, '--root-dir', 'here'])).rootDir, resolve('here'));
});

test('--root-dir and --runtime-socket: a relative path is resolved against the working directory', async (t) => {
  const flags = await parseRun(t, ['--root-dir', 'state', '--runtime-socket', 'run/podvol.sock']);
  assert.equal(flags.rootDir, join(process.cwd(), 'state'));
  assert.equal(flags.runtimeSocket, join(process.cwd(), 'run/podvol.sock'));
  const fromEnv = await parseRun(t, [], { PODVOL_ROOT_DIR: 'state', PODVOL_RUNTIME_SOCKET: 'p.sock' });
  assert.equal(fromEnv.rootDir, join(process.cwd(), 'state'));
  assert.equal(fromEnv.runtimeSocket, join(process.cwd(), 'p.sock'));
  // The socket's length limit applies to the path as it is bound.
  await assert.rejects(
    parseRun(t, ['--runtime-socket', 'x'.repeat(100)]),
    /longer than a unix socket path may be \(107 bytes\)/,
  );
  // What the operator sees: mounts and wait name the socket they tried by its absolute path.
  const r = await runCli(['mounts', 'web', '-c', 'app', '--runtime-socket', 'nowhere.sock']);
  assert.equal(r.code, 3);
  const socket = join(repoRoot, 'nowhere.sock');
  assert.equal(r.stderr, `podvol mounts: cannot reach podvol at ${socket}: connect ENOENT ${socket}\n`);
});

test('--config FILE: unknown keys, bad values and unreadable files are one-line usage errors', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'config.yaml');
  await writeFile(file, 'rootdir: /x\n');
  await assert.rejects(parseRun(t, ['--config', file]), /--config .*: unknown key "rootdir"/);
  await writeFile(file, 'bogus: 1\n');
  await assert.rejects(
    parseRun(t, ['--config', file]),
    /unknown key "bogus" \(keys are the flags of podvol run\)/,
  );
  await writeFile(file, 'syncFrequency: 60\n');
  await assert.rejects(
    parseRun(t, ['--config', file]),
    /"syncFrequency": invalid duration "60": missing unit/,
  );
  await writeFile(file, 'logLevel: loud\n');
  await assert.rejects(parseRun(t, ['--config', file]), /"logLevel": Allowed choices are/);
  await writeFile(file, '- a list\n');
  await assert.rejects(parseRun(t, ['--config', file]), /must be a mapping/);
  await writeFile(file, 'listen: [1, 2]\n');
  await assert.rejects(parseRun(t, ['--config', file]), /"listen" must be a single value/);
  await assert.rejects(parseRun(t, ['--config', join(dir, 'missing.yaml')]), /ENOENT/);
});

test('an unknown config key gets the "did you mean" a mistyped flag gets, in the spelling of the file', async (t) => {
  const file = join(await tempDir(t), 'config.yaml');
  const cases: [string, string][] = [
    ['rootdir: /x\n', 'unknown key "rootdir" (Did you mean rootDir?)'],
    ['sync-frequncy: 1m\n', 'unknown key "sync-frequncy" (Did you mean sync-frequency?)'],
    [
      'teardownSettlePeriods: 1s\n',
      'unknown key "teardownSettlePeriods" (Did you mean teardownSettlePeriod?)',
    ],
  ];
  for (const [content, message] of cases) {
    await writeFile(file, content);
    const r = await runCli(['run', '--config', file]);
    assert.equal(r.code, 2, content);
    assert.equal(r.stderr, `podvol: --config ${file}: ${message} (run podvol --help for usage)\n`);
  }
});

test('--log-format: json or text, json when stdout is not a terminal', async (t) => {
  assert.equal((await parseRun(t, [])).logFormat, process.stdout.isTTY ? 'text' : 'json');
  assert.equal((await parseRun(t, ['--log-format', 'text'])).logFormat, 'text');
  assert.equal((await parseRun(t, [], { PODVOL_LOG_FORMAT: 'json' })).logFormat, 'json');
  await assert.rejects(parseRun(t, ['--log-format', 'xml']), /Allowed choices are json, text/);
});
