// `podvol run`'s access flags parse as kubelet's do: Go bools and Go durations.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGoDuration } from '../../src/cli/options.ts';
import { buildProgram } from '../../src/cli.ts';
import { must } from '../helpers/must.ts';

async function parse(args: string[], env: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const program = buildProgram();
    const run = must(
      program.commands.find((c) => c.name() === 'run'),
      'the run command',
    );
    let flags: Record<string, unknown> = {};
    run.action((f: Record<string, unknown>) => {
      flags = f;
    });
    await program.parseAsync(['run', ...args], { from: 'user' });
    return flags;
  } finally {
    process.env = saved;
  }
}

test('Go durations, as kubelet flags take them', () => {
  assert.equal(parseGoDuration('2m0s'), 120_000);
  assert.equal(parseGoDuration('1m30s'), 90_000);
  assert.equal(parseGoDuration('500ms'), 500);
  assert.equal(parseGoDuration('1.5h'), 5_400_000);
  assert.equal(parseGoDuration('0'), 0);
  for (const bad of ['', '2', '-1s', '2 m', '1d', 'm'])
    assert.throws(() => parseGoDuration(bad), /invalid duration/, bad);
});

test("defaults are kubelet's: 2m token cache, 5m/30s authorization caches, modes left to the API server", async () => {
  const f = await parse([]);
  assert.equal(f.authenticationTokenWebhookCacheTtl, 120_000);
  assert.equal(f.authorizationWebhookCacheAuthorizedTtl, 300_000);
  assert.equal(f.authorizationWebhookCacheUnauthorizedTtl, 30_000);
  assert.equal(f.authenticationTokenWebhook, undefined, 'decided by whether an API server is configured');
  assert.equal(f.authorizationMode, undefined);
});

test('--authentication-token-webhook is a Go bool: bare, =true, =false, or from the environment', async () => {
  assert.equal((await parse(['--authentication-token-webhook'])).authenticationTokenWebhook, true);
  assert.equal((await parse(['--authentication-token-webhook=true'])).authenticationTokenWebhook, true);
  assert.equal((await parse(['--authentication-token-webhook=false'])).authenticationTokenWebhook, false);
  assert.equal(
    (await parse([], { PODVOL_AUTHENTICATION_TOKEN_WEBHOOK: 'false' })).authenticationTokenWebhook,
    false,
  );
  const f = await parse([
    '--tls-cert-file=/c',
    '--tls-private-key-file=/k',
    '--client-ca-file=/ca',
    '--authorization-mode=Webhook',
    '--authentication-token-webhook-cache-ttl=10s',
  ]);
  assert.deepEqual(
    [
      f.tlsCertFile,
      f.tlsPrivateKeyFile,
      f.clientCaFile,
      f.authorizationMode,
      f.authenticationTokenWebhookCacheTtl,
    ],
    ['/c', '/k', '/ca', 'Webhook', 10_000],
  );
});
