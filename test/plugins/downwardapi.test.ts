// kubernetes.io/downward-api with the fake mounter on a temp directory, as
// kubelet's downwardapi_test.go: fields and resources rendered as kubelet
// renders them, on a tmpfs wrapper, re-rendered when the pod changes.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { podWith } from '../helpers/pods.ts';
import { pluginHarness } from './harness.ts';

const dirOf = (root: string) => join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~downward-api', 'info');

test('labels, annotations, name and resources rendered with their modes; the wrapper is a tmpfs', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([
    {
      name: 'info',
      downwardAPI: {
        defaultMode: 0o644,
        items: [
          { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
          { path: 'meta/name', fieldRef: { fieldPath: 'metadata.name' }, mode: 0o400 },
          { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
        ],
      },
    },
  ]);
  pod.spec?.containers.forEach((c) => {
    c.resources = { limits: { cpu: '250m' } };
  });
  await (await h.mounterFor(pod, 'info')).setUp({});
  const dir = dirOf(h.root);
  assert.equal(await readFile(join(dir, 'labels'), 'utf8'), 'app="web"');
  assert.equal(await readFile(join(dir, 'meta', 'name'), 'utf8'), 'web');
  assert.equal((await stat(join(dir, 'meta', 'name'))).mode & 0o777, 0o400);
  assert.equal(await readFile(join(dir, 'cpu'), 'utf8'), '250');
  assert.deepEqual(
    h.mounter.callsOf('mount').map((c) => c.fstype),
    ['tmpfs'],
  );
});

test('a changed label is rendered by the next SetUp, without a second mount', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([
    {
      name: 'info',
      downwardAPI: {
        defaultMode: 0o644,
        items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }],
      },
    },
  ]);
  await (await h.mounterFor(pod, 'info')).setUp({});
  const changed = { ...pod, metadata: { ...pod.metadata, labels: { app: 'web', tier: 'front' } } };
  await (await h.mounterFor(changed, 'info')).setUp({});
  assert.equal(await readFile(join(dirOf(h.root), 'labels'), 'utf8'), 'app="web"\ntier="front"');
  assert.equal(h.mounter.callsOf('mount').length, 1);
});

test('an unknown field fails the volume with DownwardAPIFieldError before anything is mounted', async (t) => {
  const h = await pluginHarness(t);
  const pod = podWith([
    {
      name: 'info',
      downwardAPI: { defaultMode: 0o644, items: [{ path: 'x', fieldRef: { fieldPath: 'spec.nothing' } }] },
    },
  ]);
  await assert.rejects((await h.mounterFor(pod, 'info')).setUp({}), { reason: 'DownwardAPIFieldError' });
  assert.deepEqual(h.mounter.callsOf('mount'), []);
});
