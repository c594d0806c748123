// CSI migration (csi-translation-lib, as kubelet's desired state populator
// uses it): PersistentVolumes and inline pod volumes of in-tree types whose
// plugins are gone from kubelet are translated to the CSI driver that
// replaced them, so the CSI plugin stages and publishes them through that
// driver. Only the types below are translated; any other in-tree type stays
// an unknown volume source.

import { createHash } from 'node:crypto';
import type {
  V1CSIPersistentVolumeSource,
  V1NodeSelectorTerm,
  V1PersistentVolume,
  V1Volume,
} from '@kubernetes/client-node';
import { type Spec, VolumeError } from '../../volumehost/volume.ts';

/** v1.MigratedPluginsAnnotationKey: the CSINode annotation listing the in-tree plugins migrated on the node. */
export const migratedPluginsAnnotation = 'storage.alpha.kubernetes.io/migrated-plugins';

const zoneGA = 'topology.kubernetes.io/zone';
const regionGA = 'topology.kubernetes.io/region';
const zoneBeta = 'failure-domain.beta.kubernetes.io/zone';
const regionBeta = 'failure-domain.beta.kubernetes.io/region';
/** labelMultiZoneDelimiter: a PV's zone label lists several zones joined by this. */
const multiZoneDelimiter = '__';

/** The in-tree source field of a PersistentVolume spec and of a pod volume. */
type InTreeField =
  | 'gcePersistentDisk'
  | 'awsElasticBlockStore'
  | 'cinder'
  | 'portworxVolume'
  | 'azureDisk'
  | 'azureFile'
  | 'vsphereVolume'
  | 'rbd';

interface InTreeTranslator {
  field: InTreeField;
  inTreePluginName: string;
  driver: string;
  /** The CSI driver's zone topology key, or none (portworx keeps its topology as it is). */
  topologyKey?: string;
  /** The CSI source for a PersistentVolume (the PV for its labels). */
  pvSource(pv: V1PersistentVolume): V1CSIPersistentVolumeSource;
  /** The CSI source, the access modes and the PV name of an inline volume (of a pod in `podNamespace`). */
  inline(
    volume: V1Volume,
    podNamespace: string,
  ): { source: V1CSIPersistentVolumeSource; accessModes: string[]; name: string };
}

// biome-ignore lint/suspicious/noExplicitAny: the in-tree sources are read field by field, whichever type they are.
type AnySource = Record<string, any>;
const srcOf = (o: object | undefined, field: InTreeField): AnySource =>
  (o as AnySource | undefined)?.[field] ?? {};

/** gce_pd.go: partition as a decimal string, "" for none (0). */
const gcePartition = (p: number | undefined) => (p ? String(p) : '');

/** gce_pd.go getRegionFromZones: every zone {locale}-{region}-{zone} in one region. */
function gceRegionFromZones(zones: string[]): string {
  const regions = new Set<string>();
  for (const zone of zones) {
    const parts = zone.split('-');
    if (parts.length !== 3) {
      throw new Error(`zone in unexpected format, expected: {locale}-{region}-{zone}, got: ${zone}`);
    }
    regions.add(parts.slice(0, 2).join('-'));
  }
  if (regions.size !== 1) throw new Error(`multiple or no regions gotten from zones, got: ${[...regions]}`);
  return [...regions][0] ?? '';
}

/** aws_ebs.go KubernetesVolumeIDToEBSVolumeID: aws://<zone>/vol-..., aws:///vol-... or a bare vol-... */
export function ebsVolumeID(kubernetesID: string): string {
  if (!kubernetesID.startsWith('aws://')) return kubernetesID;
  let url: URL;
  try {
    url = new URL(kubernetesID);
  } catch (err) {
    throw new Error(`Invalid disk name (${kubernetesID}): ${(err as Error).message}`);
  }
  const awsID = url.pathname.replace(/^\/+|\/+$/g, '');
  if (!/^vol-[^/]*$/.test(awsID)) throw new Error(`Invalid format for AWS volume (${kubernetesID})`);
  return awsID;
}

const translators: readonly InTreeTranslator[] = [
  {
    field: 'gcePersistentDisk',
    inTreePluginName: 'kubernetes.io/gce-pd',
    driver: 'pd.csi.storage.gke.io',
    topologyKey: 'topology.gke.io/zone',
    pvSource(pv) {
      const src = srcOf(pv.spec, 'gcePersistentDisk');
      // The zone (or zones: a regional disk) from the PV's labels, beta label first; UNSPECIFIED without one.
      const label = pv.metadata?.labels?.[zoneBeta] || pv.metadata?.labels?.[zoneGA] || '';
      const zones = label.split(multiZoneDelimiter);
      let handle: string;
      if (zones.length === 1 && zones[0] !== '') {
        handle = `projects/UNSPECIFIED/zones/${zones[0]}/disks/${src.pdName}`;
      } else if (zones.length > 1) {
        handle = `projects/UNSPECIFIED/regions/${gceRegionFromZones(zones)}/disks/${src.pdName}`;
      } else {
        handle = `projects/UNSPECIFIED/zones/UNSPECIFIED/disks/${src.pdName}`;
      }
      return {
        driver: 'pd.csi.storage.gke.io',
        volumeHandle: handle,
        readOnly: src.readOnly === true,
        fsType: src.fsType ?? '',
        volumeAttributes: { partition: gcePartition(src.partition) },
      };
    },
    inline(volume) {
      const src = srcOf(volume, 'gcePersistentDisk');
      return {
        name: `pd.csi.storage.gke.io-${src.pdName}`,
        accessModes: [src.readOnly === true ? 'ReadOnlyMany' : 'ReadWriteOnce'],
        source: {
          driver: 'pd.csi.storage.gke.io',
          volumeHandle: `projects/UNSPECIFIED/zones/UNSPECIFIED/disks/${src.pdName}`,
          readOnly: src.readOnly === true,
          fsType: src.fsType ?? '',
          volumeAttributes: { partition: gcePartition(src.partition) },
        },
      };
    },
  },
  {
    field: 'awsElasticBlockStore',
    inTreePluginName: 'kubernetes.io/aws-ebs',
    driver: 'ebs.csi.aws.com',
    topologyKey: 'topology.ebs.csi.aws.com/zone',
    pvSource(pv) {
      const src = srcOf(pv.spec, 'awsElasticBlockStore');
      return ebsSource(src);
    },
    inline(volume) {
      const source = ebsSource(srcOf(volume, 'awsElasticBlockStore'));
      return { name: `ebs.csi.aws.com-${source.volumeHandle}`, accessModes: ['ReadWriteOnce'], source };
    },
  },
  {
    field: 'cinder',
    inTreePluginName: 'kubernetes.io/cinder',
    driver: 'cinder.csi.openstack.org',
    topologyKey: 'topology.cinder.csi.openstack.org/zone',
    pvSource: (pv) => cinderSource(srcOf(pv.spec, 'cinder')),
    inline(volume) {
      const source = cinderSource(srcOf(volume, 'cinder'));
      return {
        name: `cinder.csi.openstack.org-${source.volumeHandle}`,
        accessModes: ['ReadWriteOnce'],
        source,
      };
    },
  },
  {
    field: 'portworxVolume',
    inTreePluginName: 'kubernetes.io/portworx-volume',
    driver: 'pxd.portworx.com',
    // portworx.go: no readOnly in the CSI source, and no topology translation.
    pvSource: (pv) => {
      const src = srcOf(pv.spec, 'portworxVolume');
      return {
        driver: 'pxd.portworx.com',
        volumeHandle: src.volumeID ?? '',
        fsType: src.fsType ?? '',
        volumeAttributes: {},
      };
    },
    inline(volume) {
      const src = srcOf(volume, 'portworxVolume');
      return {
        name: `pxd.portworx.com-${src.volumeID}`,
        accessModes: [src.readOnly === true ? 'ReadOnlyMany' : 'ReadWriteOnce'],
        source: {
          driver: 'pxd.portworx.com',
          volumeHandle: src.volumeID ?? '',
          fsType: src.fsType ?? '',
          volumeAttributes: {},
        },
      };
    },
  },
  {
    // azure_disk.go: the disk URI is the handle; no topology translation.
    field: 'azureDisk',
    inTreePluginName: 'kubernetes.io/azure-disk',
    driver: 'disk.csi.azure.com',
    pvSource: (pv) => azureDiskSource(srcOf(pv.spec, 'azureDisk'), false),
    inline(volume) {
      const src = srcOf(volume, 'azureDisk');
      return {
        name: `disk.csi.azure.com-${src.diskName}`,
        accessModes: ['ReadWriteOnce'],
        source: azureDiskSource(src, true),
      };
    },
  },
  {
    // azure_file.go: handle <resource group>#<account>#<share>#, the account from the secret's name.
    field: 'azureFile',
    inTreePluginName: 'kubernetes.io/azure-file',
    driver: 'file.csi.azure.com',
    pvSource(pv) {
      const src = srcOf(pv.spec, 'azureFile');
      const resourceGroup = pv.metadata?.annotations?.['kubernetes.io/azure-file-resource-group'] ?? '';
      // A PersistentVolume's secret is in its secretNamespace, "default" without one.
      return azureFileSource(src, resourceGroup, src.secretNamespace ?? 'default');
    },
    inline(volume, podNamespace) {
      const src = srcOf(volume, 'azureFile');
      return {
        name: `file.csi.azure.com-${src.shareName}`,
        accessModes: ['ReadWriteMany'],
        // An inline volume's secret is in the pod's namespace.
        source: azureFileSource(src, '', podNamespace || 'default'),
      };
    },
  },
  {
    // vsphere_volume.go: the volume path is the handle; no readOnly, no topology translation.
    field: 'vsphereVolume',
    inTreePluginName: 'kubernetes.io/vsphere-volume',
    driver: 'csi.vsphere.vmware.com',
    pvSource: (pv) => vsphereSource(srcOf(pv.spec, 'vsphereVolume')),
    inline(volume) {
      const src = srcOf(volume, 'vsphereVolume');
      return {
        name: `csi.vsphere.vmware.com-${src.volumePath}`,
        accessModes: ['ReadWriteOnce'],
        source: vsphereSource(src),
      };
    },
  },
  {
    // rbd.go: a static volume's handle composed from its monitors, image and pool; no topology translation.
    field: 'rbd',
    inTreePluginName: 'kubernetes.io/rbd',
    driver: 'rbd.csi.ceph.com',
    pvSource: (pv) => rbdPVSource(pv),
    inline(volume, podNamespace) {
      const src = srcOf(volume, 'rbd');
      const secretRef = src.secretRef?.name
        ? { name: src.secretRef.name, namespace: podNamespace }
        : undefined;
      return {
        name: `rbd.csi.ceph.com-${src.image}`,
        accessModes: [src.readOnly === true ? 'ReadOnlyMany' : 'ReadWriteOnce'],
        source: {
          driver: 'rbd.csi.ceph.com',
          volumeHandle: src.image ?? '',
          fsType: src.fsType ?? '',
          volumeAttributes: {
            clusterID: md5Hex((src.monitors ?? []).join(',')),
            pool: src.pool || 'rbd',
            staticVolume: 'true',
            imageFeatures: 'layering',
          },
          ...(secretRef ? { nodeStageSecretRef: secretRef, controllerExpandSecretRef: secretRef } : {}),
        },
      };
    },
  },
];

const md5Hex = (s: string) => createHash('md5').update(s).digest('hex');

/**
 * rbd.go TranslateInTreePVToCSI: the handle from the PV's
 * rbd.csi.ceph.com/volume-handle annotation (a volume ceph-csi made) or, for
 * a static one, mig_mons-<md5(monitors)>_image-<image after
 * kubernetes-dynamic-pvc->_<hex(pool)>; the node attributes, the access mode
 * from readOnly, the secret as node stage and controller expand secret.
 */
function rbdPVSource(pv: V1PersistentVolume): V1CSIPersistentVolumeSource {
  const src = srcOf(pv.spec, 'rbd');
  const annotations = pv.metadata?.annotations ?? {};
  const attributes: Record<string, string> = {};
  let handle: string;
  const annotated = annotations['rbd.csi.ceph.com/volume-handle'] ?? '';
  if (annotated !== '') {
    handle = annotated;
    attributes.clusterID = annotations.clusterID ?? '';
  } else {
    const mons = (src.monitors ?? []).join(',');
    const image: string = src.image ?? '';
    const prefix = 'kubernetes-dynamic-pvc-';
    // The lib takes what follows the prefix (and panics without one): podvol refuses such an image.
    const at = image.indexOf(prefix);
    if (at < 0)
      throw new Error(
        `rbd image ${JSON.stringify(image)} has no ${prefix} prefix to compose a volume handle from`,
      );
    const imageID = image.slice(at + prefix.length).split(prefix)[0];
    attributes.staticVolume = 'true';
    attributes.clusterID = md5Hex(mons);
    handle = [
      'mig',
      `mons-${md5Hex(mons)}`,
      `image-${imageID}`,
      Buffer.from(src.pool ?? '').toString('hex'),
    ].join('_');
  }
  // fillVolAttrsForRequest.
  attributes.imageName = src.image ?? '';
  attributes.pool = src.pool ?? '';
  attributes.imageFeatures = annotations.imageFeatures || 'layering';
  attributes.imageFormat = annotations.imageFormat ?? '';
  attributes.journalPool = annotations.journalPool ?? '';
  attributes.migration = 'true';
  attributes.tryOtherMounters = 'true';
  return {
    driver: 'rbd.csi.ceph.com',
    volumeHandle: handle,
    fsType: src.fsType ?? '',
    volumeAttributes: attributes,
    ...(src.secretRef ? { nodeStageSecretRef: src.secretRef, controllerExpandSecretRef: src.secretRef } : {}),
  };
}

/**
 * azure_disk.go: kind "Managed" unless the source says, cachingMode and
 * fsType (also as attributes) when set, readOnly, and csi-migration "true"
 * (the driver's sign of a migrated volume). An inline volume's empty
 * cachingMode is left out, a PersistentVolume's kept, as the lib does.
 */
function azureDiskSource(src: AnySource, inline: boolean): V1CSIPersistentVolumeSource {
  const attributes: Record<string, string> = { kind: 'Managed', 'csi-migration': 'true' };
  if (src.cachingMode != null && (!inline || src.cachingMode !== ''))
    attributes.cachingMode = src.cachingMode;
  if (src.fsType != null) attributes.fsType = src.fsType;
  if (src.kind != null) attributes.kind = src.kind;
  return {
    driver: 'disk.csi.azure.com',
    volumeHandle: src.diskURI ?? '',
    readOnly: src.readOnly === true,
    fsType: src.fsType ?? '',
    volumeAttributes: attributes,
  };
}

/** azure_file.go getStorageAccountName: the account of a secret named azure-storage-account-<account>-secret, else the name itself. */
export function azureFileAccountName(secretName: string): string {
  return /azure-storage-account-(.+)-secret/.exec(secretName)?.[1] ?? secretName;
}

/** azure_file.go: the share as attribute sharename, the secret as the node stage secret (NodeStageVolume mounts the share). */
function azureFileSource(
  src: AnySource,
  resourceGroup: string,
  secretNamespace: string,
): V1CSIPersistentVolumeSource {
  const secretName: string = src.secretName ?? '';
  const share: string = src.shareName ?? '';
  return {
    driver: 'file.csi.azure.com',
    volumeHandle: `${resourceGroup}#${azureFileAccountName(secretName)}#${share}#`,
    readOnly: src.readOnly === true,
    volumeAttributes: { sharename: share, 'csi-migration': 'true' },
    nodeStageSecretRef: { name: secretName, namespace: secretNamespace },
  };
}

/**
 * vsphere_volume.go: fsType carried over, storagepolicyname when set. The
 * lib's inline translation reads the policy from the PV it is building (nil
 * there, so it would panic on a policy); podvol reads the volume's, as meant.
 */
function vsphereSource(src: AnySource): V1CSIPersistentVolumeSource {
  return {
    driver: 'csi.vsphere.vmware.com',
    volumeHandle: src.volumePath ?? '',
    fsType: src.fsType ?? '',
    volumeAttributes: src.storagePolicyName ? { storagepolicyname: src.storagePolicyName } : {},
  };
}

function ebsSource(src: AnySource): V1CSIPersistentVolumeSource {
  let handle: string;
  try {
    handle = ebsVolumeID(src.volumeID ?? '');
  } catch (err) {
    throw new Error(`failed to translate Kubernetes ID to EBS Volume ID ${(err as Error).message}`);
  }
  return {
    driver: 'ebs.csi.aws.com',
    volumeHandle: handle,
    readOnly: src.readOnly === true,
    fsType: src.fsType ?? '',
    // aws_ebs.go: strconv.FormatInt, so "0" for no partition (unlike GCE's "").
    volumeAttributes: { partition: String(src.partition ?? 0) },
  };
}

function cinderSource(src: AnySource): V1CSIPersistentVolumeSource {
  return {
    driver: 'cinder.csi.openstack.org',
    volumeHandle: src.volumeID ?? '',
    readOnly: src.readOnly === true,
    fsType: src.fsType ?? '',
    volumeAttributes: {},
  };
}

/** The in-tree plugin names podvol translates: the CSINode's migrated-plugins annotation, sorted as kubelet joins them. */
export const migratedPluginNames = (): string[] => translators.map((t) => t.inTreePluginName).sort();

/** in_tree_volume.go getTopologyLabel: GA labels unless the PV uses the beta ones. */
function topologyLabels(pv: V1PersistentVolume): { zone: string; region: string } {
  const keys = (pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? []).flatMap((t) =>
    (t.matchExpressions ?? []).map((e) => e.key),
  );
  if (keys.includes(zoneGA)) return { zone: zoneGA, region: regionGA };
  if (keys.includes(zoneBeta)) return { zone: zoneBeta, region: regionBeta };
  const labels = pv.metadata?.labels ?? {};
  if (zoneGA in labels) return { zone: zoneGA, region: regionGA };
  if (zoneBeta in labels) return { zone: zoneBeta, region: regionBeta };
  return { zone: zoneGA, region: regionGA };
}

/**
 * in_tree_volume.go translateTopologyFromInTreeToCSI: the zone requirement of
 * the PV's node affinity is renamed to the driver's topology key, or, when
 * there is none, the zones of the PV's zone label are added under that key;
 * a beta region requirement becomes the GA one.
 */
function translateTopology(pv: V1PersistentVolume, csiKey: string): V1PersistentVolume {
  const { zone, region } = topologyLabels(pv);
  const terms: V1NodeSelectorTerm[] = structuredClone(
    pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [],
  );
  const rename = (from: string, to: string) => {
    for (const t of terms) for (const e of t.matchExpressions ?? []) if (e.key === from) e.key = to;
  };
  const has = (key: string) =>
    terms.some((t) => (t.matchExpressions ?? []).some((e) => e.key === key && (e.values ?? []).length > 0));
  if (has(zone)) {
    rename(zone, csiKey);
  } else {
    const label = pv.metadata?.labels?.[zone];
    const zones = [
      ...new Set(
        (label ?? '')
          .split(multiZoneDelimiter)
          .map((z) => z.trim())
          .filter((z) => z !== ''),
      ),
    ].sort();
    if (zones.length > 0) {
      if (terms.length === 0) terms.push({});
      for (const t of terms)
        t.matchExpressions = [...(t.matchExpressions ?? []), { key: csiKey, operator: 'In', values: zones }];
    }
  }
  if (region === regionBeta && has(regionBeta)) rename(regionBeta, regionGA);
  if (terms.length === 0) return pv;
  return {
    ...pv,
    spec: { ...pv.spec, nodeAffinity: { ...pv.spec?.nodeAffinity, required: { nodeSelectorTerms: terms } } },
  };
}

/** gce_pd.go backwardCompatibleAccessModes: RWX is read as RWO, RWO with ROX is RWO. */
function gceAccessModes(modes: string[] | undefined): string[] | undefined {
  if (!modes) return undefined;
  const s = new Set(modes.map((m) => (m === 'ReadWriteMany' ? 'ReadWriteOnce' : m)));
  if (s.has('ReadWriteOnce')) return ['ReadWriteOnce'];
  if (s.has('ReadOnlyMany')) return ['ReadOnlyMany'];
  return ['ReadWriteOnce'];
}

function translatorFor(o: object | undefined): InTreeTranslator | undefined {
  return translators.find((t) => (o as AnySource | undefined)?.[t.field] != null);
}

/** csimigration's IsPVMigratable / IsInlineMigratable: whether this spec is one podvol translates. */
export function isMigratable(spec: Spec): boolean {
  return spec.persistentVolume
    ? translatorFor(spec.persistentVolume.spec) !== undefined
    : translatorFor(spec.volume) !== undefined;
}

/**
 * csimigration.TranslateInTreeSpecToCSI: the spec with its in-tree source
 * replaced by the CSI one. An inline volume becomes a PersistentVolume named
 * <driver>-<disk> (its directory and the unique part of its staging path, as
 * in kubelet), with the pod's volume entry kept for its name; readOnly stays
 * the spec's (for an inline volume, false: the source's readOnly goes to the
 * CSI source, i.e. to ControllerPublishVolume, as in kubelet); an inline
 * azureFile's secret is looked up in the pod's namespace. Untranslatable
 * input (an EBS id that is not one) fails the volume with kubelet's words.
 */
export function translateInTreeSpecToCSI(spec: Spec, podNamespace = ''): Spec {
  try {
    const pv = spec.persistentVolume;
    if (pv) {
      const t = translatorFor(pv.spec);
      if (!t) return spec;
      const source = t.pvSource(pv);
      const { [t.field]: _inTree, ...rest } = (pv.spec ?? {}) as AnySource;
      let out: V1PersistentVolume = { ...pv, spec: { ...rest, csi: source } };
      if (t.topologyKey) out = translateTopology(out, t.topologyKey);
      if (t.field === 'gcePersistentDisk' && out.spec)
        out.spec.accessModes = gceAccessModes(out.spec.accessModes);
      // rbd.go: the access mode is the source's readOnly.
      if (t.field === 'rbd' && out.spec)
        out.spec.accessModes = [srcOf(pv.spec, 'rbd').readOnly === true ? 'ReadOnlyMany' : 'ReadWriteOnce'];
      return { ...spec, persistentVolume: out };
    }
    const t = translatorFor(spec.volume);
    if (!t || !spec.volume) return spec;
    const { source, accessModes, name } = t.inline(spec.volume, podNamespace);
    return {
      ...spec,
      persistentVolume: {
        metadata: { name },
        spec: { csi: source, accessModes, volumeMode: 'Filesystem' },
      },
    };
  } catch (err) {
    throw new VolumeError(
      'CSIMigrationFailed',
      `failed to translate in-tree pv to CSI: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}
