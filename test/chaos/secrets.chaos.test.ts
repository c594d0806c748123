// Chaos: secret and token bytes must exist only on tmpfs. After pods with a
// secret and a service account token are set up, refreshed and torn down,
// the log, /status, /metrics and every file on persistent disk under the
// root directory (anything not on a tmpfs) are scanned for the secret's bytes
// (raw and base64) and for every token the API server issued.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { uidOf } from '../helpers/pods.ts';
import { chaosSetup, figure, peakRssMiB } from './lib.ts';

const podOf = (name: string) => ({
  metadata: { name, namespace: 'default' },
  spec: {
    nodeName: 'testnode',
    serviceAccountName: 'default',
    containers: [
      { name: 'c', image: 'i', volumeMounts: ['sec', 'tok'].map((n) => ({ name: n, mountPath: `/${n}` })) },
    ],
    volumes: [
      { name: 'sec', secret: { secretName: 'creds', defaultMode: 0o400 } },
      {
        name: 'tok',
        projected: {
          defaultMode: 0o644,
          sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3600 } }],
        },
      },
    ],
  },
  status: { phase: 'Running' },
});

/** Every regular file below `dir` that is not on a tmpfs (per the mount table). */
async function persistentFiles(dir: string): Promise<string[]> {
  const tmpfs = (await mountsBelow(dir)).filter((m) => m.fsType === 'tmpfs').map((m) => m.mountPoint);
  const out: string[] = [];
  const walk = async (d: string) => {
    if (tmpfs.includes(d)) return;
    for (const name of await readdir(d).catch(() => [])) {
      const path = join(d, name);
      const st = await lstat(path).catch(() => undefined);
      if (st?.isDirectory()) await walk(path);
      else if (st?.isFile()) out.push(path);
    }
  };
  await walk(dir);
  return out;
}

mountTest('chaos: secret and token bytes only on tmpfs, never in logs, /status or /metrics', async (t) => {
  const { api, base, root, start } = await chaosSetup(t, { api: true });
  if (!api) throw new Error('no API server');
  const s = api.store;
  const secret = `chaos-secret-${randomBytes(12).toString('hex')}`;
  s.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
  s.create('secrets', {
    metadata: { name: 'creds', namespace: 'default' },
    data: { password: Buffer.from(secret).toString('base64') },
  });
  const a = s.create('pods', podOf('a'));
  const b = s.create('pods', podOf('b'));
  // debug: the most talkative log there is.
  const p = await start(['--log-level', 'debug']);
  const secFile = (uid: string) =>
    join(root, 'pods', uid, 'volumes', 'kubernetes.io~secret', 'sec', 'password');
  for (const x of [a, b])
    await waitFor(
      'the secret on disk',
      () =>
        readFile(secFile(uidOf(x)), 'utf8').then(
          (v) => v === secret,
          () => false,
        ),
      90_000,
    );
  // A rotation and a teardown go through the log too.
  s.update('secrets', {
    metadata: { name: 'creds', namespace: 'default' },
    data: { password: Buffer.from(`${secret}-2`).toString('base64') },
  });
  await waitFor(
    'the rotated secret',
    () =>
      readFile(secFile(uidOf(a)), 'utf8').then(
        (v) => v === `${secret}-2`,
        () => false,
      ),
    90_000,
  );
  s.delete('pods', 'default', 'b', { gracePeriodSeconds: 0 });
  await waitGone('b torn down', join(root, 'pods', uidOf(b)), 120_000);

  const needles = [
    secret,
    Buffer.from(secret).toString('base64'),
    ...api.hooks.issuedTokens.map((x) => x.token),
  ];
  assert.ok(api.hooks.issuedTokens.length > 0, 'tokens were issued');
  const places: [string, string][] = [
    ['log', p.output()],
    ['/status', (await p.get('/status')).body],
    ['/metrics', (await p.get('/metrics')).body],
  ];
  const files = await persistentFiles(base);
  for (const f of files) places.push([f, await readFile(f, 'latin1')]);
  const hits = places.filter(([, text]) => needles.some((n) => text.includes(n))).map(([where]) => where);
  figure(t, 'secrets: podvol peak RSS (cluster mode)', peakRssMiB(p.proc.pid));
  figure(t, 'secrets: places scanned', `log, /status, /metrics and ${files.length} files on persistent disk`);
  figure(t, 'secrets: secret or token bytes outside tmpfs', hits.length);
  assert.deepEqual(hits, []);
});
