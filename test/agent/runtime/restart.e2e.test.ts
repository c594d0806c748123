// A runtime's view of a podvol restart: a static pod whose mounts were handed
// out, then edited in a way that cannot be applied to a volume in use, then
// podvol killed with SIGKILL and started again. The runtime waits for the
// volumes and asks for the mounts again, as it would after any restart.
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { callRuntime } from '../../../src/agent/runtime/client.ts';
import { runtimeSocketOf, startPodvol, waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { mountsBelow } from '../../helpers/mounts.ts';

const UID = 'restart-uid-1';

const manifest = (sizeLimit: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'restarted', namespace: 'default', uid: UID },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: [
            { name: 'cache', mountPath: '/cache' },
            { name: 'data', mountPath: '/data' },
            { name: 'data', mountPath: '/logs', subPath: 'logs' },
            { name: 'info', mountPath: '/info' },
            { name: 'info', mountPath: '/etc/podname', subPath: 'name' },
          ],
        },
      ],
      volumes: [
        { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit } },
        { name: 'data', emptyDir: {} },
        {
          name: 'info',
          downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] },
        },
      ],
    },
  });

type Volume = { name: string; state: string; reason: string; attempts: number };

mountTest(
  'after kill -9, a pod whose Memory emptyDir sizeLimit was edited while its mounts were handed out is ready again',
  async (t) => {
    const dir = await tempDir(t);
    const manifests = join(dir, 'manifests');
    await mkdir(manifests);
    const root = join(dir, 'root');
    const socket = runtimeSocketOf(root);
    // Generous: the server's own waits end first, however busy the machine is.
    const get = (path: string) => callRuntime(socket, 'GET', path, 300_000);
    await writeFile(join(manifests, 'restarted.json'), manifest('16Mi'));

    const first = await startPodvol({ rootDir: root, manifests });
    t.after(() => first.stop('SIGKILL'));
    assert.equal((await get(`/v1/pods/${UID}/volumes?wait=120`)).status, 200);
    const handedOut = await get(`/v1/pods/${UID}/containers/app/mounts`);
    assert.equal(handedOut.status, 200, JSON.stringify(handedOut.body));
    const cache = join(root, 'pods', UID, 'volumes/kubernetes.io~empty-dir/cache');
    await writeFile(join(cache, 'keep'), 'data');

    await writeFile(join(manifests, 'restarted.json'), manifest('32Mi'));
    await waitFor(
      'the edit reported',
      async () => {
        const { body } = await get(`/v1/pods/${UID}/volumes`);
        const cacheVolume = (body.volumes as Volume[]).find((v) => v.name === 'cache');
        return cacheVolume?.reason === 'SpecChangeRequiresRestart';
      },
      120_000,
    );
    const mountsBefore = (await mountsBelow(join(root, 'pods', UID))).map((m) => m.mountPoint).sort();
    assert.equal(
      mountsBefore.length,
      4,
      'the two tmpfs (cache, and info as kubelet mounts it) and the two subPath binds',
    );
    await first.stop('SIGKILL');

    const second = await startPodvol({ rootDir: root, manifests });
    t.after(() => second.stop());
    const waited = await get(`/v1/pods/${UID}/volumes?wait=120`);
    assert.equal(waited.status, 200, JSON.stringify(waited.body));
    assert.equal(waited.body.ready, true);
    const volumes = waited.body.volumes as Volume[];
    assert.deepEqual(
      volumes.map((v) => [v.name, v.state, v.reason]),
      [
        ['cache', 'mounted', 'SpecChangeRequiresRestart'],
        ['data', 'mounted', ''],
        ['info', 'mounted', ''],
      ],
    );
    const again = await get(`/v1/pods/${UID}/containers/app/mounts`);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body.mounts, handedOut.body.mounts, 'the same mounts as before the restart');
    assert.equal(await readFile(join(cache, 'keep'), 'utf8'), 'data', 'the tmpfs was not emptied');
    assert.deepEqual(
      (await mountsBelow(join(root, 'pods', UID))).map((m) => m.mountPoint).sort(),
      mountsBefore,
      'nothing unmounted or mounted again',
    );
  },
);
