// makeMounts as kubelet: OCI mount objects in volumeMounts order, read-only
// rules, propagation, subPath checks with kubelet's messages, and
// GetExtraSupplementalGroupsForPod.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { RuntimeApiError } from '../../../src/agent/runtime/errors.ts';
import {
  extraSupplementalGroups,
  findContainer,
  makeMounts,
  type SubPathPreparer,
} from '../../../src/agent/runtime/mounts.ts';
import type { PodVolume, RuntimeState } from '../../../src/agent/runtime/types.ts';
import { formatMountsTable } from '../../../src/cli/mounts.ts';
import type { VolumeHost } from '../../../src/volumehost/types.ts';
import { at, must } from '../../helpers/must.ts';

const readOnlyPlugins = new Set([
  'kubernetes.io/configmap',
  'kubernetes.io/secret',
  'kubernetes.io/downward-api',
  'kubernetes.io/projected',
]);
const state = {
  volumeReadOnly: (v: PodVolume) => readOnlyPlugins.has(v.pluginName ?? '') || v.spec?.readOnly === true,
} as unknown as RuntimeState;
const host = {
  getKubeConfig: () => undefined,
  getHostIP: () => '10.0.0.1',
  getNodeAllocatable: () => ({}),
} as unknown as VolumeHost;

function recordingSubPaths() {
  const calls: Parameters<SubPathPreparer['prepare']>[0][] = [];
  const subPaths: SubPathPreparer = {
    async prepare(req) {
      calls.push(req);
      return `/root/pods/${req.podUID}/volume-subpaths/${req.volumeName}/${req.containerName}/${req.index}`;
    },
  };
  return { calls, subPaths };
}

const vol = (name: string, pluginName: string, readOnly = false): [string, PodVolume] => [
  name,
  {
    name,
    pluginName,
    path: `/root/pods/u1/volumes/${pluginName.replace('/', '~')}/${name}`,
    spec: { readOnly },
  },
];
const volumes = new Map([
  vol('data', 'kubernetes.io/empty-dir'),
  vol('cfg', 'kubernetes.io/configmap'),
  vol('tok', 'kubernetes.io/projected'),
  vol('host', 'kubernetes.io/host-path'),
]);

const podWith = (container: Record<string, unknown>, extra: Record<string, unknown> = {}): V1Pod =>
  ({
    metadata: { name: 'p', namespace: 'ns', uid: 'u1' },
    spec: { containers: [{ name: 'app', image: 'x', ...container }], ...extra },
  }) as V1Pod;

async function mountsOf(pod: V1Pod, name = 'app') {
  const { calls, subPaths } = recordingSubPaths();
  const found = findContainer(pod, name);
  assert.ok(found);
  const { mounts, imageVolumes } = await makeMounts({ state, host, subPaths }, pod, found, volumes);
  return { mounts, imageVolumes, calls };
}

async function refusal(pod: V1Pod): Promise<RuntimeApiError> {
  try {
    await mountsOf(pod);
  } catch (err) {
    assert.ok(err instanceof RuntimeApiError, String(err));
    return err;
  }
  assert.fail('makeMounts should have refused');
}

test('mounts come in volumeMounts order as OCI bind mounts with ro/rw and propagation', async () => {
  const pod = podWith({
    volumeMounts: [
      { name: 'data', mountPath: '/data' },
      { name: 'cfg', mountPath: '/etc/cfg' },
      { name: 'data', mountPath: 'relative', readOnly: true, mountPropagation: 'HostToContainer' },
      { name: 'tok', mountPath: '/var/run/secrets/tokens', mountPropagation: 'None' },
      { name: 'host', mountPath: '/host' },
    ],
  });
  const { mounts } = await mountsOf(pod);
  assert.deepEqual(
    mounts.map((m) => [m.destination, m.type, m.source.split('/').pop(), m.options.join(',')]),
    [
      ['/data', 'bind', 'data', 'rbind,rw,rprivate'],
      ['/etc/cfg', 'bind', 'cfg', 'rbind,ro,rprivate'],
      ['/relative', 'bind', 'data', 'rbind,ro,rslave'],
      ['/var/run/secrets/tokens', 'bind', 'tok', 'rbind,ro,rprivate'],
      ['/host', 'bind', 'host', 'rbind,rw,rprivate'],
    ],
  );
});

test('Bidirectional is rshared for a privileged container and refused otherwise with the API message', async () => {
  const mount = { name: 'data', mountPath: '/d', mountPropagation: 'Bidirectional' };
  const ok = await mountsOf(podWith({ volumeMounts: [mount], securityContext: { privileged: true } }));
  assert.deepEqual(at(ok.mounts, 0).options, ['rbind', 'rw', 'rshared']);
  const err = await refusal(podWith({ volumeMounts: [{ name: 'data', mountPath: '/x' }, mount] }));
  assert.equal(err.status, 422);
  assert.equal(
    err.message,
    'spec.containers[0].volumeMounts[1].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers',
  );
  const bad = await refusal(podWith({ volumeMounts: [{ ...mount, mountPropagation: 'Sideways' }] }));
  assert.equal(bad.message, 'invalid MountPropagation mode: "Sideways"');
});

test('init and ephemeral containers are found and named in field paths', () => {
  const pod = {
    spec: {
      containers: [{ name: 'a' }],
      initContainers: [{ name: 'init' }],
      ephemeralContainers: [{ name: 'debug' }],
    },
  } as unknown as V1Pod;
  assert.equal(findContainer(pod, 'init')?.field, 'spec.initContainers[0]');
  assert.equal(findContainer(pod, 'debug')?.field, 'spec.ephemeralContainers[0]');
  assert.equal(findContainer(pod, 'nope'), undefined);
});

test('subPath: absolute and .. are refused with kubelet messages, nothing is prepared', async () => {
  for (const [subPath, message] of [
    ['/etc', 'error SubPath `/etc` must not be an absolute path'],
    ['a/../../b', "unable to provision SubPath `a/../../b`: must not contain '..'"],
    ['..', "unable to provision SubPath `..`: must not contain '..'"],
  ]) {
    const { subPaths, calls } = recordingSubPaths();
    const pod = podWith({ volumeMounts: [{ name: 'data', mountPath: '/d', subPath }] });
    await assert.rejects(
      makeMounts({ state, host, subPaths }, pod, must(findContainer(pod, 'app'), 'container app'), volumes),
      (err) => {
        assert.ok(err instanceof RuntimeApiError);
        assert.equal(err.status, 422);
        assert.equal(err.message, message);
        return true;
      },
    );
    assert.equal(calls.length, 0);
  }
});

test('subPath and subPathExpr go through the subpath preparer with the mount index', async () => {
  const pod = podWith({
    env: [
      { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'DIR', value: 'logs-$(POD)' },
    ],
    volumeMounts: [
      { name: 'data', mountPath: '/a' },
      { name: 'data', mountPath: '/b', subPath: 'x/y' },
      { name: 'data', mountPath: '/c', subPathExpr: '$(DIR)/$$(NOT)' },
    ],
  });
  const { mounts, calls } = await mountsOf(pod);
  assert.deepEqual(
    calls.map((c) => [c.index, c.subPath, c.volumeName, c.containerName]),
    [
      [1, 'x/y', 'data', 'app'],
      [2, 'logs-p/$(NOT)', 'data', 'app'],
    ],
  );
  assert.equal(at(mounts, 1).source, '/root/pods/u1/volume-subpaths/data/app/1');
});

test('subPathExpr with a missing or empty variable is refused as kubelet does', async () => {
  const pod = podWith({
    env: [{ name: 'EMPTY', value: '' }],
    volumeMounts: [{ name: 'data', mountPath: '/c', subPathExpr: '$(NOPE)/$(EMPTY)/$(A)' }],
  });
  const err = await refusal(pod);
  assert.equal(err.status, 422);
  assert.equal(err.message, 'missing value for A, EMPTY, NOPE');
});

test('image volumes are listed apart for the runtime (kubelet hands CRI an image spec), never as OCI mounts', async () => {
  const images = new Map<string, PodVolume>([
    ...volumes,
    [
      'model',
      {
        name: 'model',
        pluginName: 'kubernetes.io/image',
        path: '',
        spec: {
          readOnly: false,
          volume: {
            name: 'model',
            image: { reference: 'quay.io/crio/artifact:v2', pullPolicy: 'IfNotPresent' },
          },
        },
      },
    ],
  ]);
  const pod = podWith({
    env: [{ name: 'SUB', value: 'weights' }],
    volumeMounts: [
      { name: 'data', mountPath: '/data' },
      { name: 'model', mountPath: '/model' },
      { name: 'model', mountPath: 'part', subPathExpr: '$(SUB)/v1', mountPropagation: 'HostToContainer' },
      { name: 'model', mountPath: '/dir', subPath: 'd' },
    ],
  });
  const { calls, subPaths } = recordingSubPaths();
  const got = await makeMounts(
    { state, host, subPaths },
    pod,
    must(findContainer(pod, 'app'), 'container app'),
    images,
  );
  assert.deepEqual(
    got.mounts.map((m) => m.destination),
    ['/data'],
  );
  assert.deepEqual(got.imageVolumes, [
    {
      destination: '/model',
      reference: 'quay.io/crio/artifact:v2',
      pullPolicy: 'IfNotPresent',
      readOnly: true,
      propagation: 'rprivate',
    },
    {
      destination: '/part',
      reference: 'quay.io/crio/artifact:v2',
      pullPolicy: 'IfNotPresent',
      subPath: 'weights/v1',
      readOnly: true,
      propagation: 'rslave',
    },
    {
      destination: '/dir',
      reference: 'quay.io/crio/artifact:v2',
      pullPolicy: 'IfNotPresent',
      subPath: 'd',
      readOnly: true,
      propagation: 'rprivate',
    },
  ]);
  // Nothing is prepared on the host for an image subPath: the runtime resolves it inside the image.
  assert.equal(calls.length, 0);
  // The subPath rules still apply, with kubelet's messages.
  const climbing = podWith({ volumeMounts: [{ name: 'model', mountPath: '/m', subPath: 'a/../..' }] });
  await assert.rejects(
    makeMounts(
      { state, host, subPaths },
      climbing,
      must(findContainer(climbing, 'app'), 'container app'),
      images,
    ),
    (err) =>
      err instanceof RuntimeApiError &&
      err.status === 422 &&
      err.message === "unable to provision SubPath `a/../..`: must not contain '..'",
  );
});

test('a volumeMount of a volume that is not set up is a 409', async () => {
  const err = await refusal(podWith({ volumeMounts: [{ name: 'ghost', mountPath: '/g' }] }));
  assert.equal(err.status, 409);
  assert.equal(err.message, 'cannot find volume "ghost" to mount into container "app"');
});

test('extra supplemental groups come from persistent volumes GID annotations, minus the pod own', () => {
  const pv = (gid: string): PodVolume => ({
    name: gid,
    spec: {
      readOnly: false,
      persistentVolume: { metadata: { annotations: { 'pv.beta.kubernetes.io/gid': gid } } },
    },
  });
  const vols = new Map([
    ['a', pv('2000')],
    ['b', pv('1000')],
    ['c', pv('3000')],
    ['d', pv('x')],
    ['e', pv('2000')],
  ]);
  const pod = podWith({}, { securityContext: { supplementalGroups: [3000] } });
  assert.deepEqual(extraSupplementalGroups(pod, vols), [1000, 2000]);
  assert.deepEqual(
    extraSupplementalGroups(podWith({}), new Map([vol('data', 'kubernetes.io/empty-dir')])),
    [],
  );
});

test('podvol mounts -o table prints the bind mounts, then the image volumes as image:<reference>', () => {
  assert.equal(
    formatMountsTable(
      [{ destination: '/data', source: '/r/pods/u/volumes/x/data', options: ['rbind', 'rw', 'rprivate'] }],
      [
        {
          destination: '/model',
          reference: 'quay.io/a:v1',
          pullPolicy: 'IfNotPresent',
          propagation: 'rprivate',
        },
        {
          destination: '/w\x1b[2J',
          reference: 'b:latest',
          pullPolicy: 'Always',
          subPath: 'w',
          propagation: 'rslave',
        },
      ],
    ),
    [
      'DESTINATION   SOURCE                     OPTIONS',
      '/data         /r/pods/u/volumes/x/data   rbind,rw,rprivate',
      '/model        image:quay.io/a:v1         ro,rprivate,pullPolicy=IfNotPresent',
      '/w\\x1b[2J     image:b:latest             ro,rslave,pullPolicy=Always,subPath=w',
      '',
    ].join('\n'),
  );
});
