// In-tree `local` PersistentVolumes (kubelet's kubernetes.io/local-volume):
// podvol in cluster mode against the test API server binds the PV's directory
// into each pod's volume directory, applies fsGroup, checks the PV's node
// affinity, and refuses block devices and block mode with a reason.
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { execa } from 'execa';
import { startTestApiServer } from '../apiserver/server.ts';
import { type PodvolProcess, startPodvol, volumeOf, waitFor, waitGone } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { uidOf } from '../helpers/pods.ts';

async function cluster(t: TestContext) {
  const api = await startTestApiServer();
  t.after(() => api.close());
  const base = await tempDir(t, 'pv-local-');
  api.store.create('nodes', {
    metadata: { name: 'testnode', labels: { 'kubernetes.io/hostname': 'testnode', 'disk-tier': '3' } },
    status: {
      allocatable: { cpu: '2', memory: '4Gi' },
      addresses: [{ type: 'InternalIP', address: '10.0.0.7' }],
    },
  });
  const root = join(base, 'root');
  const p = await startPodvol({
    rootDir: root,
    extra: ['--kubeconfig', await api.kubeconfigPath(base), '--teardown-settle-period', '0s'],
  });
  t.after(() => p.stop());
  return { api, base, root, p };
}

type Cluster = Awaited<ReturnType<typeof cluster>>;

const onNode = (hostname: string) => ({
  required: {
    nodeSelectorTerms: [
      { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [hostname] }] },
    ],
  },
});

/** A claim bound to a local PV of `path`. */
function localClaim(
  c: Cluster,
  name: string,
  path: string,
  o: { nodeAffinity?: unknown; volumeMode?: string; mountOptions?: string[] } = {},
) {
  const claim = c.api.store.create('persistentvolumeclaims', {
    metadata: { name, namespace: 'default' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      volumeName: `pv-${name}`,
      resources: { requests: { storage: '1Gi' } },
    },
    status: { phase: 'Bound' },
  });
  c.api.store.create('persistentvolumes', {
    metadata: { name: `pv-${name}` },
    spec: {
      accessModes: ['ReadWriteOnce'],
      capacity: { storage: '1Gi' },
      claimRef: { namespace: 'default', name, uid: claim.metadata?.uid },
      local: { path },
      nodeAffinity: o.nodeAffinity ?? onNode('testnode'),
      volumeMode: o.volumeMode ?? 'Filesystem',
      ...(o.mountOptions ? { mountOptions: o.mountOptions } : {}),
    },
    status: { phase: 'Bound' },
  });
}

function pod(c: Cluster, name: string, claim: string, o: { fsGroup?: number; device?: boolean } = {}) {
  return c.api.store.create('pods', {
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: 'testnode',
      ...(o.fsGroup !== undefined ? { securityContext: { fsGroup: o.fsGroup } } : {}),
      containers: [
        {
          name: 'app',
          image: 'busybox',
          ...(o.device
            ? { volumeDevices: [{ name: 'data', devicePath: '/dev/xvda' }] }
            : { volumeMounts: [{ name: 'data', mountPath: '/data' }] }),
        },
      ],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
    },
    status: { phase: 'Running' },
  });
}

async function settled(p: PodvolProcess, name: string, state: 'mounted' | 'failed') {
  let last: unknown;
  return waitFor(
    `${name} ${state}`,
    async () => {
      const v = await volumeOf(p, name);
      last = v;
      return v?.state === state && (state === 'mounted' || v.reason !== '') ? v : undefined;
    },
    60_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last status: ${JSON.stringify(last)}`);
  });
}

mountTest(
  'a local PV is bind-mounted into each pod that uses it, with fsGroup; the directory outlives the pods',
  async (t) => {
    const c = await cluster(t);
    const disk = join(c.base, 'disks', 'ssd1');
    await mkdir(disk, { recursive: true, mode: 0o755 });
    await writeFile(join(disk, 'existing'), 'data on the node\n');
    localClaim(c, 'fast', disk, { mountOptions: ['noatime'] });
    const a = pod(c, 'a', 'fast', { fsGroup: 4321 });
    const uidA = uidOf(a);
    const va = await settled(c.p, 'a', 'mounted');
    const dirA = join(c.root, 'pods', uidA, 'volumes', 'kubernetes.io~local-volume', 'pv-fast');
    assert.equal(va.path, dirA);
    assert.equal(va.plugin, 'kubernetes.io/local-volume');
    assert.equal(await readFile(join(dirA, 'existing'), 'utf8'), 'data on the node\n');
    // kubelet's SetVolumeOwnership on the first mount: the group and setgid on the volume root.
    const st = await stat(disk);
    assert.equal(st.gid, 4321);
    assert.equal(st.mode & 0o2070, 0o2070);
    const mount = (await mountsBelow(c.root)).find((m) => m.mountPoint === dirA);
    assert.ok(mount, 'a bind mount at the pod volume directory');

    // A second pod: its own bind mount of the same directory, writes shared.
    const b = pod(c, 'b', 'fast');
    const uidB = uidOf(b);
    await settled(c.p, 'b', 'mounted');
    const dirB = join(c.root, 'pods', uidB, 'volumes', 'kubernetes.io~local-volume', 'pv-fast');
    await writeFile(join(dirB, 'from-b'), 'b');
    assert.equal(await readFile(join(dirA, 'from-b'), 'utf8'), 'b');

    c.api.store.delete('pods', 'default', 'a', { gracePeriodSeconds: 0 });
    c.api.store.delete('pods', 'default', 'b', { gracePeriodSeconds: 0 });
    await waitGone('pod a torn down', join(c.root, 'pods', uidA), 60_000);
    await waitGone('pod b torn down', join(c.root, 'pods', uidB), 60_000);
    assert.deepEqual(await mountsBelow(c.root), []);
    // Only the bind mounts went: the node's data is where it was.
    assert.equal(await readFile(join(disk, 'existing'), 'utf8'), 'data on the node\n');
    assert.equal(await readFile(join(disk, 'from-b'), 'utf8'), 'b');
  },
);

mountTest('local PVs that cannot be used here get precise reasons; other pods are unaffected', async (t) => {
  const c = await cluster(t);
  const disk = join(c.base, 'disks', 'ok');
  await mkdir(disk, { recursive: true });
  localClaim(c, 'ok', disk);
  // Node affinity: another node's disk, and a Gt requirement this node's label satisfies.
  localClaim(c, 'elsewhere', disk, { nodeAffinity: onNode('othernode') });
  localClaim(c, 'tier', disk, {
    nodeAffinity: {
      required: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: 'disk-tier', operator: 'Gt', values: ['2'] }] }],
      },
    },
  });
  localClaim(c, 'missing', join(c.base, 'disks', 'nope'));
  const dev = join(c.base, 'disks', 'blockdev');
  await execa('mknod', [dev, 'b', '7', '250'], { timeout: 10_000 });
  localClaim(c, 'device', dev);
  localClaim(c, 'raw', disk, { volumeMode: 'Block' });
  localClaim(c, 'climb', `${disk}/../ok`);
  for (const n of ['ok', 'elsewhere', 'tier', 'missing', 'device', 'climb']) pod(c, `p-${n}`, n);
  pod(c, 'p-raw', 'raw', { device: true });

  await settled(c.p, 'p-ok', 'mounted');
  await settled(c.p, 'p-tier', 'mounted');
  const expect: Record<string, [string, RegExp]> = {
    elsewhere: ['NodeAffinityMismatch', /^no matching NodeSelectorTerms$/],
    missing: ['LocalPathInvalid', /nope: no such file or directory$/],
    device: ['LocalBlockDeviceNotSupported', /is a block device: podvol does not format/],
    raw: ['BlockVolumeNotSupported', /used as a block device \(volumeDevices\)/],
    climb: ['InvalidPath', /^invalid path: .* must not contain '\.\.'$/],
  };
  for (const [n, [reason, message]] of Object.entries(expect)) {
    const v = await settled(c.p, `p-${n}`, 'failed');
    assert.equal(v.reason, reason, n);
    assert.match(v.message, message, n);
  }
  // kubelet's event wording for the affinity check, naming the spec: the claim's PersistentVolume.
  await waitFor('the NodeAffinity event', () =>
    c.api.store
      .list('events', 'default')
      .find(
        (e) =>
          (e as { message?: string }).message ===
          'MountVolume.NodeAffinity check failed for volume "pv-elsewhere" : no matching NodeSelectorTerms',
      ),
  );
  // Nothing was mounted for the refused volumes, and nothing outside the pod directories changed.
  const mps = (await mountsBelow(c.root)).map((m) => m.mountPoint);
  assert.equal(mps.length, 2, mps.join(', '));
});
