// kubelet's ConstructVolumeSpec for CSI: a volume podvol has no record of
// (a node taken over from kubelet) is rebuilt from the pod's vol_data.json,
// enough to unpublish it and to keep an attachable volume in volumesInUse.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { startHarness } from '../../csi/harness.ts';
import { tempDir } from '../../helpers/mountns.ts';

test('a volume with only kubelet vol_data.json becomes a PV or inline spec; attach-required drivers stay reportable', async (t) => {
  // No CSIDriver attachRequired: false, so attach is required.
  const h = await startHarness(await tempDir(t, 'pv-csi-reconstruct-'), { csiDriver: {} });
  t.after(() => h.stop());
  const dir = (inner: string) => join(h.root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~csi', inner);
  const write = async (inner: string, data: Record<string, string>) => {
    await mkdir(dir(inner), { recursive: true });
    await writeFile(join(dir(inner), 'vol_data.json'), `${JSON.stringify(data)}\n`);
  };
  await write('pv-a', {
    attachmentID: 'csi-x',
    driverName: h.driverName,
    nodeName: 'harnessnode',
    specVolID: 'pv-a',
    volumeHandle: 'disk-1',
    volumeLifecycleMode: 'Persistent',
  });
  await write('scratch', {
    driverName: h.driverName,
    specVolID: 'scratch',
    volumeHandle: 'csi-abc',
    volumeLifecycleMode: 'Ephemeral',
  });

  const pv = await h.plugin.constructVolumeSpec('pv-a', dir('pv-a'));
  assert.deepEqual(pv, {
    persistentVolume: {
      metadata: { name: 'pv-a' },
      spec: { csi: { driver: h.driverName, volumeHandle: 'disk-1' } },
    },
    readOnly: false,
  });
  assert.equal(h.plugin.attachableVolumeName(pv), `kubernetes.io/csi/${h.driverName}^disk-1`);
  assert.equal(h.plugin.newMounter(pv, { metadata: { uid: 'uid-1' } }).getPath(), join(dir('pv-a'), 'mount'));

  const inline = await h.plugin.constructVolumeSpec('scratch', dir('scratch'));
  assert.deepEqual(inline, { volume: { name: 'scratch', csi: { driver: h.driverName } }, readOnly: false });
  assert.equal(h.plugin.attachableVolumeName(inline), undefined);

  await assert.rejects(Promise.resolve(h.plugin.constructVolumeSpec('none', dir('none'))), {
    reason: 'ReconstructFailed',
  });
});
