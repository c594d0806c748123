// `podvol plan` of CSI volumes: the daemon's CSI plugin on the daemon's
// operation path (MountDevice, SetUp, TearDown, UnmountDevice) with the
// recording driver of plan-csi.ts, whose calls are the plan's `driver` steps.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1PersistentVolume, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { failingVolumes, type Plan, type PlanStep, planManifest } from '../../../src/agent/ops/plan.ts';
import { type DriverStep, recordingDriver } from '../../../src/agent/ops/plan-csi.ts';
import { formatPlan } from '../../../src/agent/ops/plan-format.ts';
import type { ClaimLookup } from '../../../src/volumehost/kube/claims.ts';

const uid = 'csi-0000-uid';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

const claim = (name: string, volumeName: string): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: 'shop', uid: `claim-${name}` },
  spec: { volumeName },
  status: { phase: 'Bound' },
});
const volume = (name: string, claimName: string, volumeHandle: string): V1PersistentVolume => ({
  metadata: { name },
  spec: {
    claimRef: { name: claimName, namespace: 'shop', uid: `claim-${claimName}` },
    accessModes: ['ReadWriteOnce'],
    csi: {
      driver: 'disk.csi.example.com',
      volumeHandle,
      fsType: 'ext4',
      volumeAttributes: { pool: 'fast' },
      nodeStageSecretRef: { name: 'stage-creds', namespace: 'shop' },
    },
  },
});

/** What the daemon's claim watches would see: two bound claims, one PersistentVolume without a handle. */
const claimObjects = new Map([
  ['data', claim('data', 'pv-1')],
  ['nohandle', claim('nohandle', 'pv-2')],
]);
const volumeObjects = new Map([
  ['pv-1', volume('pv-1', 'data', 'vol-1')],
  ['pv-2', volume('pv-2', 'nohandle', '')],
]);
const claims: ClaimLookup = {
  claim: (_ns, name) => ({ synced: true, object: claimObjects.get(name) }),
  volume: (name) => ({ synced: true, object: volumeObjects.get(name) }),
};

const manifest = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'csi', namespace: 'shop', uid },
  spec: {
    containers: [
      {
        name: 'app',
        image: 'busybox',
        volumeMounts: ['data', 'scratch', 'bad', 'nohandle'].map((name) => ({ name, mountPath: `/${name}` })),
      },
    ],
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
      {
        name: 'scratch',
        csi: {
          driver: 'hostpath.csi.k8s.io',
          volumeAttributes: { size: '1Gi' },
          nodePublishSecretRef: { name: 'creds' },
        },
      },
      { name: 'bad', csi: { driver: '-bad' } },
      { name: 'nohandle', persistentVolumeClaim: { claimName: 'nohandle' } },
    ],
  },
};

/** vol_data.json is written atomically: a `.tmp` file renamed over it. */
const writesFile = (s: PlanStep, path: string) =>
  (s.action === 'write' && s.path === `${path}.tmp`) || (s.action === 'rename' && s.detail === path);

interface Call {
  driver: string;
  method: string;
  path: string;
  request: Record<string, unknown>;
}

/** The driver calls of one volume in one phase, NodeGetCapabilities left out. */
function calls(plan: Plan, phase: string, volume: string): Call[] {
  return plan.steps
    .filter((s) => s.action === 'driver' && s.phase === phase && s.volume === volume)
    .map((s) => {
      const [driver = '', method = '', ...rest] = s.detail.split(' ');
      const json = rest.join(' ');
      return { driver, method, path: s.path, request: json.startsWith('{') ? JSON.parse(json) : {} };
    })
    .filter((c) => c.method !== 'NodeGetCapabilities');
}

async function plan(): Promise<{ plan: Plan; root: string }> {
  const base = await mkdtemp(join(tmpdir(), 'podvol-plan-csi-'));
  const root = join(base, 'r');
  try {
    const p = await planManifest(JSON.stringify(manifest), 'csi.json', {
      rootDir: root,
      nodeName: 'n',
      claims,
      csiDrivers: [{ metadata: { name: 'disk.csi.example.com' }, spec: { attachRequired: false } }],
    });
    return { plan: p, root };
  } finally {
    await rm(base, { recursive: true });
  }
}

test('plan stages and publishes a claim’s CSI PersistentVolume through the recording driver, then unpublishes and unstages it', async () => {
  const { plan: p, root } = await plan();
  const podVolume = `${root}/pods/${uid}/volumes/kubernetes.io~csi/pv-1`;
  const staging = `${root}/plugins/kubernetes.io/csi/disk.csi.example.com/${sha256('vol-1')}`;
  const capability = {
    mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' },
    access_mode: 'SINGLE_NODE_WRITER',
  };
  assert.deepEqual(calls(p, 'setup', 'data'), [
    {
      driver: 'disk.csi.example.com',
      method: 'NodeStageVolume',
      path: `${staging}/globalmount`,
      request: {
        volume_id: 'vol-1',
        staging_target_path: `${staging}/globalmount`,
        volume_capability: capability,
        publish_context_keys: [],
        volume_context_keys: ['pool'],
        secret_keys: ['<key>'],
      },
    },
    {
      driver: 'disk.csi.example.com',
      method: 'NodePublishVolume',
      path: `${podVolume}/mount`,
      request: {
        volume_id: 'vol-1',
        staging_target_path: `${staging}/globalmount`,
        target_path: `${podVolume}/mount`,
        readonly: false,
        volume_capability: capability,
        publish_context_keys: [],
        volume_context_keys: ['pool'],
        secret_keys: [],
      },
    },
  ]);
  // The plugin's own files around the calls, as the daemon writes them: the staging json before NodeStage.
  const setup = p.steps.filter((s) => s.phase === 'setup' && s.volume === 'data');
  const at = (pred: (s: (typeof setup)[number]) => boolean) => setup.findIndex(pred);
  const stagingJson = at((s) => writesFile(s, `${staging}/vol_data.json`));
  const podJson = at((s) => writesFile(s, `${podVolume}/vol_data.json`));
  const stage = at((s) => s.detail.startsWith('disk.csi.example.com NodeStageVolume'));
  const publish = at((s) => s.detail.startsWith('disk.csi.example.com NodePublishVolume'));
  assert.ok(
    stagingJson >= 0 && stagingJson < stage && stage < podJson && podJson < publish,
    JSON.stringify(setup),
  );
  assert.ok(
    setup.some((s) => s.action === 'mkdir' && s.path === `${staging}/globalmount` && s.detail === '0750'),
  );
  assert.ok(
    p.steps.some(
      (s) => s.action === 'driver' && /NodeGetCapabilities \(assumed: STAGE_UNSTAGE_VOLUME/.test(s.detail),
    ),
  );
  const file = (path: string) => {
    const data = p.setUp.entries.find((x) => x.path === path)?.data;
    assert.ok(data, `${path} is planned`);
    return JSON.parse(data.toString());
  };
  assert.deepEqual(file(`${staging}/vol_data.json`), {
    volumeHandle: 'vol-1',
    driverName: 'disk.csi.example.com',
  });
  assert.deepEqual(file(`${podVolume}/vol_data.json`), {
    specVolID: 'pv-1',
    volumeHandle: 'vol-1',
    driverName: 'disk.csi.example.com',
    nodeName: 'n',
    attachmentID: `csi-${sha256('vol-1disk.csi.example.comn')}`,
    volumeLifecycleMode: 'Persistent',
  });
  // Tear-down: NodeUnpublish, then (nothing else uses it) NodeUnstage, and the plugin's files go.
  assert.deepEqual(
    calls(p, 'teardown', 'data').map((c) => [c.method, c.path, c.request]),
    [
      [
        'NodeUnpublishVolume',
        `${podVolume}/mount`,
        { volume_id: 'vol-1', target_path: `${podVolume}/mount` },
      ],
      [
        'NodeUnstageVolume',
        `${staging}/globalmount`,
        { volume_id: 'vol-1', staging_target_path: `${staging}/globalmount` },
      ],
    ],
  );
  assert.deepEqual(
    p.tornDown.entries.filter((e) => e.path.endsWith('vol_data.json')).map((e) => e.path),
    [],
  );
  assert.ok(!p.tornDown.entries.some((e) => e.path.startsWith(staging)));
});

test('plan publishes an inline CSI volume unstaged; bad CSI volumes fail as in the daemon; no secret value is printed', async () => {
  const { plan: p, root } = await plan();
  const podVolume = `${root}/pods/${uid}/volumes/kubernetes.io~csi/scratch`;
  const handle = `csi-${sha256(`${uid}scratch`)}`;
  assert.deepEqual(calls(p, 'setup', 'scratch'), [
    {
      driver: 'hostpath.csi.k8s.io',
      method: 'NodePublishVolume',
      path: `${podVolume}/mount`,
      request: {
        volume_id: handle,
        staging_target_path: '',
        target_path: `${podVolume}/mount`,
        readonly: false,
        volume_capability: {
          mount: { fs_type: '', mount_flags: [], volume_mount_group: '' },
          access_mode: 'SINGLE_NODE_WRITER',
        },
        publish_context_keys: [],
        volume_context_keys: ['size'],
        secret_keys: ['<key>'],
      },
    },
  ]);
  assert.ok(p.steps.some((s) => s.volume === 'scratch' && writesFile(s, `${podVolume}/vol_data.json`)));
  assert.ok(p.steps.some((s) => s.action === 'fetch' && s.detail.startsWith('secret shop/creds')));
  assert.ok(
    p.steps.some((s) => s.action === 'fetch' && s.detail.startsWith('CSIDriver hostpath.csi.k8s.io')),
  );
  assert.deepEqual(
    calls(p, 'teardown', 'scratch').map((c) => c.method),
    ['NodeUnpublishVolume'],
  );
  assert.deepEqual(
    failingVolumes(p).map((s) => `${s.volume}: ${s.detail.split(':')[0]}`),
    ['bad: InvalidDriverName', 'nohandle: InvalidVolumeHandle'],
  );
  // The secrets' placeholder values (`<key "<key>" of secret shop/creds>`) are the values the driver got.
  const out = `${formatPlan(p)}${JSON.stringify(p.steps)}`;
  assert.ok(!out.includes('of secret shop/'), out);
  assert.match(out, /driver hostpath\.csi\.k8s\.io NodePublishVolume \{"volume_id":"csi-/);
});

test('the recording driver records requests with secrets and volume_context by key only', async () => {
  const steps: DriverStep[] = [];
  const d = recordingDriver('disk.csi.example.com', (s) => steps.push(s));
  await d.nodePublishVolume({
    volume_id: 'vol-1',
    publish_context: { devicePath: '/dev/xvdf' },
    staging_target_path: '/s',
    target_path: '/t',
    volume_capability: { block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } },
    readonly: true,
    secrets: { password: 'hunter2' },
    volume_context: { 'csi.storage.k8s.io/serviceAccount.tokens': '{"a":{"token":"tok-123"}}' },
  });
  assert.equal(steps.length, 1);
  assert.equal(steps[0]?.path, '/t');
  const detail = steps[0]?.detail ?? '';
  assert.ok(
    !detail.includes('hunter2') && !detail.includes('tok-123') && !detail.includes('/dev/xvdf'),
    detail,
  );
  assert.match(detail, /"secret_keys":\["password"\]/);
  assert.match(detail, /"volume_context_keys":\["csi\.storage\.k8s\.io\/serviceAccount\.tokens"\]/);
  assert.match(detail, /"readonly":true/);
  assert.deepEqual([...(await d.nodeGetCapabilities())], ['STAGE_UNSTAGE_VOLUME']);
  const none = recordingDriver('x', () => {}, { capabilities: [] });
  assert.equal((await none.nodeGetCapabilities()).size, 0);
});
