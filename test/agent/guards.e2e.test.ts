// Issue 15, finding 4: configuration mistakes must not destroy data. A wrong
// --node-name, a root directory that is not podvol's, and a first sync that
// would tear down every adopted volume, against the real daemon and real mounts.
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestApiServer } from '../apiserver/server.ts';
import { daemonDirs, type PodvolProcess, startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { uidOf } from '../helpers/pods.ts';
import { runCli } from './ops/cli.ts';

const FQDN = 'node1.example.internal';

const dbPod = (extra: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'db', namespace: 'default' },
  spec: {
    ...extra,
    containers: [
      {
        name: 'db',
        image: 'busybox',
        volumeMounts: ['data', 'cache'].map((v) => ({ name: v, mountPath: `/${v}` })),
      },
    ],
    volumes: [
      { name: 'data', emptyDir: {} },
      { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
    ],
  },
});

const mounted = (name: string) => async (p: PodvolProcess) => {
  const e = (await p.status()).pods.find((x) => x.name === name);
  return e && e.volumes.length === 2 && e.volumes.every((v) => v.state === 'mounted') ? e : undefined;
};

mountTest(
  'finding 4: a wrong --node-name neither starts on the root nor, adopted, tears anything down',
  async (t) => {
    const api = await startTestApiServer();
    t.after(() => api.close());
    const base = await tempDir(t);
    const kubeconfig = await api.kubeconfigPath(base);
    api.store.create('nodes', { metadata: { name: FQDN }, status: { allocatable: { memory: '4Gi' } } });
    const pod = api.store.create('pods', { ...dbPod({ nodeName: FQDN }), status: { phase: 'Running' } });
    const uid = uidOf(pod);
    const root = join(base, 'root');
    const cluster = ['--kubeconfig', kubeconfig];

    const first = await startPodvol({ rootDir: root, extra: [...cluster, '--node-name', FQDN] });
    await waitFor('db mounted', () => mounted('db')(first));
    const podDir = join(root, 'pods', uid);
    const data = join(podDir, 'volumes/kubernetes.io~empty-dir/data/database');
    await writeFile(data, 'rows');
    await first.stop();
    const mountsBefore = await mountsBelow(podDir);
    assert.equal(mountsBefore.length, 1, 'the Memory emptyDir stays mounted across the stop');

    // The systemd unit's short host name: refused before anything runs.
    const refused = await runCli(['run', '--root-dir', root, '--node-name', 'node1', ...cluster]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /serves node "node1\.example\.internal".*--adopt-root-dir/);

    // Forced through: the Node object does not exist, so the pods never count as synced.
    const second = await startPodvol({
      rootDir: root,
      extra: [...cluster, '--node-name', 'node1', '--adopt-root-dir'],
    });
    t.after(() => second.stop());
    const readyz = await waitFor('readyz names the missing node', async () => {
      const r = await second.get('/readyz');
      return r.status === 503 && r.body.includes('node "node1" does not exist on the API server')
        ? r
        : undefined;
    });
    assert.match(readyz.body, /is --node-name right\?/);
    await new Promise((r) => setTimeout(r, 5000)); // two housekeeping periods, fifty reconciler passes
    assert.equal(await readFile(data, 'utf8'), 'rows');
    assert.deepEqual(
      (await mountsBelow(podDir)).map((m) => m.mountPoint),
      mountsBefore.map((m) => m.mountPoint),
    );
  },
);

mountTest(
  "finding 4: a root directory with another agent's pod directories is refused, and left alone",
  async (t) => {
    const base = await tempDir(t);
    const root = join(base, 'kubelet');
    const theirs = join(root, 'pods/0b5ce8a0-0000-4000-8000-000000000001/volumes/kubernetes.io~empty-dir/db');
    await mkdir(theirs, { recursive: true });
    await writeFile(join(theirs, 'data'), 'theirs');
    const manifests = join(base, 'manifests');
    await mkdir(manifests);
    const r = await runCli(['run', '--root-dir', root, '--node-name', 'n', '--pod-manifest-path', manifests]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /holds pod directories .* no podvol mark/);
    assert.equal(await readFile(join(theirs, 'data'), 'utf8'), 'theirs');
  },
);

mountTest(
  'a first sync that would tear down every adopted volume is held; the pod coming back releases it',
  async (t) => {
    const base = await tempDir(t);
    const { root, manifests } = await daemonDirs(base);
    await writeFile(join(manifests, 'db.json'), JSON.stringify(dbPod()));
    const first = await startPodvol({ rootDir: root, manifests });
    const entry = await waitFor('db mounted', () => mounted('db-testnode')(first));
    const podDir = join(root, 'pods', entry.uid);
    const data = join(podDir, 'volumes/kubernetes.io~empty-dir/data/database');
    await writeFile(data, 'rows');
    await first.stop();
    // The manifest is gone when podvol starts again (an unmounted manifest disk, say).
    await rm(join(manifests, 'db.json'));
    const second = await startPodvol({
      rootDir: root,
      manifests,
      extra: ['--teardown-settle-period', '2m0s'],
    });
    t.after(() => second.stop());
    const hold = await waitFor('teardown held', async () => {
      const s = (await second.status()) as {
        teardownHold?: { volumes: number; adopted: number; message: string };
      };
      return s.teardownHold;
    });
    assert.deepEqual([hold.volumes, hold.adopted], [2, 2]);
    // The log line and /status come from the same decision but reach us by different pipes.
    await waitFor('hold logged', () =>
      second.logLines().some((l) => String(l.msg).includes('holding every teardown')),
    );
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(await readFile(data, 'utf8'), 'rows', 'nothing torn down while held');
    assert.equal((await mountsBelow(podDir)).length, 1);

    await writeFile(join(manifests, 'db.json'), JSON.stringify(dbPod()));
    await waitFor('db mounted again', () => mounted('db-testnode')(second));
    assert.equal(((await second.status()) as { teardownHold?: unknown }).teardownHold, undefined);
    assert.equal(await readFile(data, 'utf8'), 'rows');
  },
);
