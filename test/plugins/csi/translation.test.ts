// csi-translation-lib's translations, per in-tree type: driver, handle,
// attributes, fsType, access modes and topology as the lib builds them.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import test from 'node:test';
import type { V1PersistentVolume } from '@kubernetes/client-node';
import {
  azureFileAccountName,
  ebsVolumeID,
  migratedPluginNames,
  translateInTreeSpecToCSI,
} from '../../../src/plugins/csi/translation.ts';
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

test('azureDisk: the disk URI is the handle, kind Managed unless set, cachingMode and fsType as attributes, csi-migration', () => {
  const uri = '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1';
  const pv = pvSpec({
    metadata: { name: 'az', labels: { 'topology.kubernetes.io/zone': 'westeurope-1' } },
    spec: {
      accessModes: ['ReadWriteOnce'],
      azureDisk: { diskName: 'd1', diskURI: uri, cachingMode: 'ReadOnly', fsType: 'xfs', readOnly: true },
    },
  });
  assert.deepEqual(pv?.spec?.csi, {
    driver: 'disk.csi.azure.com',
    volumeHandle: uri,
    readOnly: true,
    fsType: 'xfs',
    volumeAttributes: { kind: 'Managed', 'csi-migration': 'true', cachingMode: 'ReadOnly', fsType: 'xfs' },
  });
  assert.equal(pv?.spec?.azureDisk, undefined);
  // The lib translates no topology for Azure Disk: the PV keeps what it had (none here).
  assert.equal(pv?.spec?.nodeAffinity, undefined);
  const dedicated = pvSpec({
    metadata: { name: 'az2' },
    spec: {
      azureDisk: {
        diskName: 'd2',
        diskURI: 'https://acct.blob.core.windows.net/vhds/d2.vhd',
        kind: 'Dedicated',
        cachingMode: '',
      },
    },
  });
  assert.deepEqual(dedicated?.spec?.csi?.volumeAttributes, {
    kind: 'Dedicated',
    'csi-migration': 'true',
    cachingMode: '',
  });
  assert.equal(dedicated?.spec?.csi?.fsType, '');

  const inline = translateInTreeSpecToCSI({
    volume: { name: 'data', azureDisk: { diskName: 'd3', diskURI: uri, cachingMode: '' } },
    readOnly: false,
  }).persistentVolume;
  assert.equal(inline?.metadata?.name, 'disk.csi.azure.com-d3');
  assert.deepEqual(inline?.spec?.accessModes, ['ReadWriteOnce']);
  // An inline volume's empty cachingMode is left out.
  assert.deepEqual(inline?.spec?.csi?.volumeAttributes, { kind: 'Managed', 'csi-migration': 'true' });
});

test("azureFile: handle <rg>#<account>#<share>#, the secret as node stage secret in its namespace (inline: the pod's)", () => {
  assert.equal(azureFileAccountName('azure-storage-account-myacct-secret'), 'myacct');
  assert.equal(azureFileAccountName('custom-secret'), 'custom-secret', 'not the template: the name itself');
  const pv = pvSpec({
    metadata: { name: 'af', annotations: { 'kubernetes.io/azure-file-resource-group': 'rg1' } },
    spec: {
      accessModes: ['ReadWriteMany'],
      azureFile: {
        secretName: 'azure-storage-account-myacct-secret',
        shareName: 'share1',
        secretNamespace: 'storage',
        readOnly: true,
      },
    },
  });
  assert.deepEqual(pv?.spec?.csi, {
    driver: 'file.csi.azure.com',
    volumeHandle: 'rg1#myacct#share1#',
    readOnly: true,
    volumeAttributes: { sharename: 'share1', 'csi-migration': 'true' },
    nodeStageSecretRef: { name: 'azure-storage-account-myacct-secret', namespace: 'storage' },
  });
  assert.equal(pv?.spec?.azureFile, undefined);
  const noNamespace = pvSpec({
    metadata: { name: 'af2' },
    spec: { azureFile: { secretName: 's', shareName: 'share2' } },
  });
  assert.equal(noNamespace?.spec?.csi?.volumeHandle, '#s#share2#');
  assert.deepEqual(noNamespace?.spec?.csi?.nodeStageSecretRef, { name: 's', namespace: 'default' });

  const inline = translateInTreeSpecToCSI(
    {
      volume: { name: 'files', azureFile: { secretName: 'azure-storage-account-a-secret', shareName: 'sh' } },
      readOnly: false,
    },
    'shop',
  ).persistentVolume;
  assert.equal(inline?.metadata?.name, 'file.csi.azure.com-sh');
  assert.deepEqual(inline?.spec?.accessModes, ['ReadWriteMany']);
  assert.equal(inline?.spec?.csi?.volumeHandle, '#a#sh#');
  assert.deepEqual(inline?.spec?.csi?.nodeStageSecretRef, {
    name: 'azure-storage-account-a-secret',
    namespace: 'shop',
  });
});

test('vsphereVolume: the volume path is the handle, fsType and storagepolicyname carried, no readOnly', () => {
  const path = '[vsanDatastore] kubevols/disk-1.vmdk';
  const pv = pvSpec({
    metadata: { name: 'vs' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      vsphereVolume: { volumePath: path, fsType: 'ext4', storagePolicyName: 'gold' },
    },
  });
  assert.deepEqual(pv?.spec?.csi, {
    driver: 'csi.vsphere.vmware.com',
    volumeHandle: path,
    fsType: 'ext4',
    volumeAttributes: { storagepolicyname: 'gold' },
  });
  assert.equal(pv?.spec?.vsphereVolume, undefined);
  const inline = translateInTreeSpecToCSI({
    volume: { name: 'v', vsphereVolume: { volumePath: path, storagePolicyName: 'gold' } },
    readOnly: false,
  }).persistentVolume;
  assert.equal(inline?.metadata?.name, `csi.vsphere.vmware.com-${path}`);
  assert.deepEqual(inline?.spec?.csi?.volumeAttributes, { storagepolicyname: 'gold' });
  assert.equal(inline?.spec?.csi?.fsType, '');
});

test('rbd: a static PV gets the composed mig_ handle, an annotated one its own; node attributes; inline by image', () => {
  const mons = ['10.0.0.1:6789', '10.0.0.2:6789'];
  const md5 = createHash('md5').update(mons.join(',')).digest('hex');
  const pv = pvSpec({
    metadata: { name: 'rb' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      rbd: {
        monitors: mons,
        image: 'kubernetes-dynamic-pvc-e0b45b52',
        pool: 'replicapool',
        fsType: 'ext4',
        readOnly: true,
        secretRef: { name: 'ceph', namespace: 'rook' },
      },
    },
  });
  assert.deepEqual(pv?.spec?.csi, {
    driver: 'rbd.csi.ceph.com',
    volumeHandle: `mig_mons-${md5}_image-e0b45b52_${Buffer.from('replicapool').toString('hex')}`,
    fsType: 'ext4',
    volumeAttributes: {
      staticVolume: 'true',
      clusterID: md5,
      imageName: 'kubernetes-dynamic-pvc-e0b45b52',
      pool: 'replicapool',
      imageFeatures: 'layering',
      imageFormat: '',
      journalPool: '',
      migration: 'true',
      tryOtherMounters: 'true',
    },
    nodeStageSecretRef: { name: 'ceph', namespace: 'rook' },
    controllerExpandSecretRef: { name: 'ceph', namespace: 'rook' },
  });
  assert.deepEqual(pv?.spec?.accessModes, ['ReadOnlyMany'], 'the access mode is the source readOnly');
  const annotated = pvSpec({
    metadata: {
      name: 'rb2',
      annotations: {
        'rbd.csi.ceph.com/volume-handle': '0001-0009-rook-ceph-x',
        clusterID: 'rook-ceph',
        imageFeatures: 'layering,fast-diff',
      },
    },
    spec: { rbd: { monitors: mons, image: 'csi-vol-1', pool: 'p' } },
  });
  assert.equal(annotated?.spec?.csi?.volumeHandle, '0001-0009-rook-ceph-x');
  assert.equal(annotated?.spec?.csi?.volumeAttributes?.clusterID, 'rook-ceph');
  assert.equal(annotated?.spec?.csi?.volumeAttributes?.staticVolume, undefined);
  assert.equal(annotated?.spec?.csi?.volumeAttributes?.imageFeatures, 'layering,fast-diff');
  // A static image without the in-tree provisioner's prefix: the lib panics, podvol refuses.
  assert.throws(
    () => pvSpec({ metadata: { name: 'rb3' }, spec: { rbd: { monitors: mons, image: 'hand-made' } } }),
    (e: unknown) =>
      e instanceof VolumeError &&
      e.reason === 'CSIMigrationFailed' &&
      /kubernetes-dynamic-pvc-/.test(e.message),
  );
  const inline = translateInTreeSpecToCSI(
    {
      volume: { name: 'r', rbd: { monitors: mons, image: 'img', secretRef: { name: 'ceph' } } },
      readOnly: false,
    },
    'shop',
  ).persistentVolume;
  assert.equal(inline?.metadata?.name, 'rbd.csi.ceph.com-img');
  assert.deepEqual(inline?.spec?.accessModes, ['ReadWriteOnce']);
  assert.deepEqual(inline?.spec?.csi, {
    driver: 'rbd.csi.ceph.com',
    volumeHandle: 'img',
    fsType: '',
    volumeAttributes: { clusterID: md5, pool: 'rbd', staticVolume: 'true', imageFeatures: 'layering' },
    nodeStageSecretRef: { name: 'ceph', namespace: 'shop' },
    controllerExpandSecretRef: { name: 'ceph', namespace: 'shop' },
  });
});

test('the CSINode annotation lists every translated in-tree plugin, sorted', () => {
  assert.deepEqual(migratedPluginNames(), [
    'kubernetes.io/aws-ebs',
    'kubernetes.io/azure-disk',
    'kubernetes.io/azure-file',
    'kubernetes.io/cinder',
    'kubernetes.io/gce-pd',
    'kubernetes.io/portworx-volume',
    'kubernetes.io/rbd',
    'kubernetes.io/vsphere-volume',
  ]);
});
