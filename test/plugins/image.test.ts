// `image` volumes: kubelet's kubernetes.io/image plugin succeeds without
// mounting (the runtime mounts the image); podvol reports them mounted,
// with no host path, and leaves nothing on disk for them.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { containerMounts } from '../../src/agent/runtime/api.ts';
import { runtimeStateOf } from '../../src/agent/runtime/state.ts';
import { TerminationGate } from '../../src/agent/runtime/termination.ts';
import { imagePluginName } from '../../src/plugins/image.ts';
import { harness } from '../agent/volumemanager/harness.ts';
import { podWith } from '../helpers/pods.ts';

const pod = podWith(
  [
    { name: 'model', image: { reference: 'quay.io/crio/artifact:v2', pullPolicy: 'IfNotPresent' } },
    { name: 'scratch', emptyDir: {} },
  ],
  {},
  { name: 'artifact', namespace: 'default', uid: 'img-1' },
);

test('an image volume is set up without touching the host and torn down the same way', async (t) => {
  const { root, vm, mounter, host, pluginMgr, setPods, setReady, settle } = await harness(t, [pod]);
  setReady(true);
  await settle();

  const model = vm.status()[0]?.volumes.find((v) => v.name === 'model');
  assert.deepEqual(
    { state: model?.state, plugin: model?.plugin, path: model?.path, reason: model?.reason },
    { state: 'mounted', plugin: imagePluginName, path: '', reason: '' },
  );
  assert.deepEqual(await readdir(join(root, 'pods/img-1/volumes')), ['kubernetes.io~empty-dir']);
  assert.deepEqual(mounter.callsOf('mount'), [], 'nothing mounted');

  // The runtime socket lists it for the runtime (no 409 for a volume without a host path).
  const gate = new TerminationGate({ rootDir: root, logger: pino({ level: 'silent' }) });
  await gate.load();
  const answer = await containerMounts(
    {
      state: runtimeStateOf(vm, pluginMgr, gate),
      host,
      subPaths: { prepare: () => Promise.reject(new Error('no subPath here')) },
    },
    'img-1',
    'app',
  );
  assert.equal(answer.status, 200);
  const body = answer.body as { mounts: { destination: string }[]; imageVolumes: unknown[] };
  assert.deepEqual(
    body.mounts.map((m) => m.destination),
    ['/scratch'],
  );
  assert.deepEqual(body.imageVolumes, [
    {
      destination: '/model',
      reference: 'quay.io/crio/artifact:v2',
      pullPolicy: 'IfNotPresent',
      readOnly: true,
      propagation: 'rprivate',
    },
  ]);

  setPods([]);
  await settle();
  assert.deepEqual(vm.status(), []);
});
