// `podvol status`'s AGE across a restart: it counts from the volume record's
// `created`, not from when the new process first desired the volume.
import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonDirs, startPodvol, volumeOf, waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { runCli } from './cli.ts';

const manifest = `apiVersion: v1
kind: Pod
metadata: { name: aged, namespace: default }
spec:
  containers: [{ name: c, image: busybox, volumeMounts: [{ name: data, mountPath: /data }] }]
  volumes: [{ name: data, emptyDir: {} }]
`;

mountTest("AGE survives a restart: it counts from the volume's record", async (t) => {
  const { root, manifests } = await daemonDirs(await tempDir(t));
  await writeFile(join(manifests, 'aged.yaml'), manifest);
  const first = await startPodvol({ rootDir: root, manifests });
  t.after(() => first.stop());
  await waitFor(
    'the volume mounted',
    async () => (await volumeOf(first, 'aged-testnode'))?.state === 'mounted',
  );
  const [uid] = await readdir(join(root, 'podvol', 'pods'));
  assert.ok(uid);
  assert.equal(await first.stop(), 0);

  // As if it had been set up two days ago by an earlier podvol.
  const record = join(root, 'podvol', 'pods', uid, 'kubernetes.io~empty-dir', 'data.json');
  const written = JSON.parse(await readFile(record, 'utf8'));
  assert.equal(typeof written.created, 'string', 'the record says when the volume was first desired');
  const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000 - 60_000).toISOString();
  await writeFile(record, JSON.stringify({ ...written, created: twoDaysAgo }));

  const second = await startPodvol({ rootDir: root, manifests });
  t.after(() => second.stop());
  await waitFor(
    'the volume adopted',
    async () => (await volumeOf(second, 'aged-testnode'))?.state === 'mounted',
  );
  const r = await runCli(['status', '--server', second.url]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\ndefault +aged-testnode +data +kubernetes\.io\/empty-dir +mounted +2d +<none>\n/);
  // Written again by the adopting SetUp, the record keeps its time.
  assert.equal(JSON.parse(await readFile(record, 'utf8')).created, twoDaysAgo);
});
