// SELinux mounts (kubelet's SELinuxMountReadWriteOncePod): a CSIDriver with
// seLinuxMount: true, a pod with an SELinux label and a ReadWriteOncePod
// volume get `context="<label>"` in the mount flags of NodeStageVolume and
// NodePublishVolume and seLinuxMountContext in both vol_data.json files. These
// machines have no SELinux, so kubelet would do none of it here: the plugin's
// host check is forced on to see what a driver on an SELinux host receives,
// and left as it is to see that nothing changes on this one.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { sha256Hex } from '../../../src/plugins/csi/vol-data.ts';
import { hostSELinuxEnabled } from '../../../src/volumehost/selinux-host.ts';
import { VolumeError } from '../../../src/volumehost/volume.ts';
import { readCalls } from '../../csi/driver.ts';
import { claimVolume, type Harness, startHarness } from '../../csi/harness.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';

const label = 'system_u:object_r:container_file_t:s0:c15,c25';

/** Pod `p<n>` whose container mounts the claim volume `data`, with the pod-level seLinuxOptions given. */
function labelledVolume(h: Harness, n: number, o: { accessModes?: string[]; seLinux?: V1Pod['spec'] } = {}) {
  const v = claimVolume(h, n);
  const pv = v.spec.persistentVolume;
  if (pv?.spec) pv.spec.accessModes = o.accessModes ?? ['ReadWriteOncePod'];
  v.pod.spec = {
    securityContext: { seLinuxOptions: { level: 's0:c15,c25' } },
    containers: [{ name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
    ...o.seLinux,
  };
  return v;
}

const flagsOf = (h: Harness, method: string, volumeID: string) =>
  readCalls(h.stateDir)
    .filter((c) => c.method === method && c.request.volume_id === volumeID)
    .map(
      (c) =>
        (c.request.volume_capability as { mount?: { mount_flags?: string[] } } | undefined)?.mount
          ?.mount_flags,
    );

const volData = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;

function jsonFiles(h: Harness, v: { uid: string; inner: string; handle: string }) {
  return {
    staging: join(
      h.root,
      'plugins',
      'kubernetes.io',
      'csi',
      h.driverName,
      sha256Hex(v.handle),
      'vol_data.json',
    ),
    pod: join(h.root, 'pods', v.uid, 'volumes', 'kubernetes.io~csi', v.inner, 'vol_data.json'),
  };
}

mountTest(
  'SELinux forced on: context= in NodeStage and NodePublish flags, seLinuxMountContext in both jsons',
  async (t) => {
    const h = await startHarness(await tempDir(t, 'pv-csi-selinux-'), {
      csiDriver: { attachRequired: false, seLinuxMount: true },
      seLinuxEnabled: () => true,
    });
    t.after(() => h.stop());
    const v = labelledVolume(h, 1);
    const mounter = h.plugin.newMounter(v.spec, v.pod);
    await h.plugin.mountDevice(v.spec, v.pod);
    await mounter.setUp({});

    // Go's %q quoting keeps the level's comma inside the one option.
    const flag = `context="${label}"`;
    assert.deepEqual(flagsOf(h, 'NodeStageVolume', v.handle), [[flag]]);
    assert.deepEqual(flagsOf(h, 'NodePublishVolume', v.handle), [[flag]]);
    const files = jsonFiles(h, v);
    assert.equal(volData(files.staging).seLinuxMountContext, label);
    assert.equal(volData(files.pod).seLinuxMountContext, label);
    // Mounted with the pod's label: the runtime must not relabel it.
    assert.equal(mounter.getAttributes().selinuxRelabel, false);
    await h.plugin.newUnmounter(v.inner, v.uid).tearDown();
  },
);

mountTest('SELinux forced on: the rules that leave the context out', async (t) => {
  const h = await startHarness(await tempDir(t, 'pv-csi-selinux-rules-'), {
    csiDriver: { attachRequired: false, seLinuxMount: true },
    seLinuxEnabled: () => true,
  });
  t.after(() => h.stop());
  const cases = [
    // SELinuxMount gate off (its default): a ReadWriteOnce volume is relabelled by the runtime instead.
    labelledVolume(h, 2, { accessModes: ['ReadWriteOnce'] }),
    // ReadWriteOncePod must be the only access mode.
    labelledVolume(h, 3, { accessModes: ['ReadWriteOncePod', 'ReadOnlyMany'] }),
    // The pod asks for the runtime's recursive relabel.
    labelledVolume(h, 4, {
      seLinux: {
        securityContext: { seLinuxOptions: { level: 's0:c1,c2' }, seLinuxChangePolicy: 'Recursive' },
        containers: [{ name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }] }],
      },
    }),
    // No SELinux label anywhere in the pod.
    labelledVolume(h, 5, {
      seLinux: {
        securityContext: {},
        containers: [{ name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }] }],
      },
    }),
  ];
  for (const v of cases) {
    const mounter = h.plugin.newMounter(v.spec, v.pod);
    await h.plugin.mountDevice(v.spec, v.pod);
    await mounter.setUp({});
    assert.deepEqual(flagsOf(h, 'NodeStageVolume', v.handle), [[]], v.handle);
    assert.deepEqual(flagsOf(h, 'NodePublishVolume', v.handle), [[]], v.handle);
    const files = jsonFiles(h, v);
    assert.equal(volData(files.staging).seLinuxMountContext, undefined);
    assert.equal(volData(files.pod).seLinuxMountContext, undefined);
    // Not mounted with a context on an SELinux host: the runtime relabels.
    assert.equal(mounter.getAttributes().selinuxRelabel, true);
    await h.plugin.newUnmounter(v.inner, v.uid).tearDown();
  }

  // A container's own seLinuxOptions replace the pod's; two containers needing different labels fail the volume.
  const conflict = labelledVolume(h, 6, {
    seLinux: {
      securityContext: { seLinuxOptions: { level: 's0:c15,c25' } },
      containers: [
        { name: 'a', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }] },
        {
          name: 'b',
          image: 'x',
          securityContext: { seLinuxOptions: { type: 'spc_t', level: 's0:c15,c25' } },
          volumeMounts: [{ name: 'data', mountPath: '/d' }],
        },
      ],
    },
  });
  const err = await h.plugin.mountDevice(conflict.spec, conflict.pod).then(
    () => assert.fail('two labels on one volume cannot both be mounted'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof VolumeError);
  assert.equal(err.reason, 'SELinuxLabelConflict');
  assert.equal(
    err.message,
    'multiple SELinux labels found: system_u:object_r:container_file_t:s0:c15,c25,system_u:object_r:spc_t:s0:c15,c25',
  );
  assert.deepEqual(flagsOf(h, 'NodeStageVolume', conflict.handle), []);
});

mountTest(
  'SELinux forced on: the SELinuxMount gate mounts every PersistentVolume with the context',
  async (t) => {
    const h = await startHarness(await tempDir(t, 'pv-csi-selinux-gate-'), {
      csiDriver: { attachRequired: false, seLinuxMount: true },
      seLinuxEnabled: () => true,
      seLinuxMountFeature: true,
    });
    t.after(() => h.stop());
    const v = labelledVolume(h, 7, { accessModes: ['ReadWriteOnce'] });
    await h.plugin.mountDevice(v.spec, v.pod);
    await h.plugin.newMounter(v.spec, v.pod).setUp({});
    assert.deepEqual(flagsOf(h, 'NodeStageVolume', v.handle), [[`context="${label}"`]]);
    assert.deepEqual(flagsOf(h, 'NodePublishVolume', v.handle), [[`context="${label}"`]]);
    await h.plugin.newUnmounter(v.inner, v.uid).tearDown();
  },
);

mountTest('on this host (no SELinux) nothing changes, whatever the driver and pod say', async (t) => {
  assert.equal(hostSELinuxEnabled(), false, 'these tests assume a host without SELinux');
  const h = await startHarness(await tempDir(t, 'pv-csi-selinux-off-'), {
    csiDriver: { attachRequired: false, seLinuxMount: true },
  });
  t.after(() => h.stop());
  const v = labelledVolume(h, 8);
  const mounter = h.plugin.newMounter(v.spec, v.pod);
  await h.plugin.mountDevice(v.spec, v.pod);
  await mounter.setUp({});
  assert.deepEqual(flagsOf(h, 'NodeStageVolume', v.handle), [[]]);
  assert.deepEqual(flagsOf(h, 'NodePublishVolume', v.handle), [[]]);
  const files = jsonFiles(h, v);
  assert.equal(volData(files.staging).seLinuxMountContext, undefined);
  assert.equal(volData(files.pod).seLinuxMountContext, undefined);
  assert.equal(mounter.getAttributes().selinuxRelabel, false);
  await h.plugin.newUnmounter(v.inner, v.uid).tearDown();
});
