// csi-translation-lib's translations, per in-tree type: driver, handle,
// attributes, fsType, access modes and topology as the lib builds them.
import assert from 'node:assert/strict';
import test from 'node:test';
import type { V1PersistentVolume } from '@kubernetes/client-node';
import { ebsVolumeID, translateInTreeSpecToCSI } from '../../../src/plugins/csi/translation.ts';
import { VolumeError } from '../../../src/volumehost/volume.ts';

const pvSpec = (pv: V1PersistentVolume) =>
  translateInTreeSpecToCSI({ persistentVolume: pv, readOnly: false }).persistentVolume;

test('gcePersistentDisk: zone label gives a zonal handle, two zones a regional one, the zone affinity the driver key', () => {
  const zonal = pvSpec({
    metadata: { name: 'a', labels: { 'topology.kubernetes.io/zone': 'us-central1-a' } },
    spec: {
      accessModes: ['ReadWriteOnce', 'ReadOnlyMany'],
      gcePersistentDisk: { pdName: 'd', fsType: 'xfs', partition: 2, readOnly: true },
    },
  });
  assert.deepEqual(zonal?.spec?.csi, {
    driver: 'pd.csi.storage.gke.io',
    volumeHandle: 'projects/UNSPECIFIED/zones/us-central1-a/disks/d',
    readOnly: true,
    fsType: 'xfs',
    volumeAttributes: { partition: '2' },
  });
  assert.equal(zonal?.spec?.gcePersistentDisk, undefined);
  assert.deepEqual(zonal?.spec?.accessModes, ['ReadWriteOnce']);
  assert.deepEqual(zonal?.spec?.nodeAffinity?.required?.nodeSelectorTerms, [
    { matchExpressions: [{ key: 'topology.gke.io/zone', operator: 'In', values: ['us-central1-a'] }] },
  ]);
  const regional = pvSpec({
    metadata: {
      name: 'b',
      labels: { 'failure-domain.beta.kubernetes.io/zone': 'us-central1-a__us-central1-b' },
    },
    spec: { gcePersistentDisk: { pdName: 'r' } },
  });
  assert.equal(regional?.spec?.csi?.volumeHandle, 'projects/UNSPECIFIED/regions/us-central1/disks/r');
  assert.deepEqual(regional?.spec?.csi?.volumeAttributes, { partition: '' });
});

test('awsElasticBlockStore: aws:// ids lose their URL, partition is "0" when unset', () => {
  assert.equal(ebsVolumeID('aws://us-east-1a/vol-0123'), 'vol-0123');
  assert.equal(ebsVolumeID('aws:///vol-0123'), 'vol-0123');
  assert.equal(ebsVolumeID('vol-0123'), 'vol-0123');
  const inline = translateInTreeSpecToCSI({
    volume: { name: 'v', awsElasticBlockStore: { volumeID: 'aws://us-east-1a/vol-9', fsType: 'ext4' } },
    readOnly: false,
  });
  assert.equal(inline.persistentVolume?.metadata?.name, 'ebs.csi.aws.com-vol-9');
  assert.deepEqual(inline.persistentVolume?.spec?.csi, {
    driver: 'ebs.csi.aws.com',
    volumeHandle: 'vol-9',
    readOnly: false,
    fsType: 'ext4',
    volumeAttributes: { partition: '0' },
  });
  assert.deepEqual(inline.persistentVolume?.spec?.accessModes, ['ReadWriteOnce']);
  assert.throws(
    () =>
      pvSpec({
        metadata: { name: 'x' },
        spec: { awsElasticBlockStore: { volumeID: 'aws://z/not-a-volume' } },
      }),
    (e: unknown) =>
      e instanceof VolumeError &&
      e.reason === 'CSIMigrationFailed' &&
      e.message ===
        'failed to translate in-tree pv to CSI: failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://z/not-a-volume)',
  );
});

test('cinder and portworxVolume: the volume ID is the handle, no attributes', () => {
  assert.deepEqual(
    pvSpec({ metadata: { name: 'c' }, spec: { cinder: { volumeID: 'c-1', fsType: 'ext4' } } })?.spec?.csi,
    {
      driver: 'cinder.csi.openstack.org',
      volumeHandle: 'c-1',
      readOnly: false,
      fsType: 'ext4',
      volumeAttributes: {},
    },
  );
  const px = translateInTreeSpecToCSI({
    volume: { name: 'p', portworxVolume: { volumeID: 'px-1', readOnly: true } },
    readOnly: false,
  });
  assert.equal(px.persistentVolume?.metadata?.name, 'pxd.portworx.com-px-1');
  assert.deepEqual(px.persistentVolume?.spec?.accessModes, ['ReadOnlyMany']);
  assert.deepEqual(px.persistentVolume?.spec?.csi, {
    driver: 'pxd.portworx.com',
    volumeHandle: 'px-1',
    fsType: '',
    volumeAttributes: {},
  });
});
