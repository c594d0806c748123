// Per-volume validation of a pod: the pod-level checks (names, sources, mounts
// that name a volume) here, each source's own checks next to its plugin. The API server rejects a whole pod for any
// of these; a node agent must instead fail just the affected volume, with a
// precise reason, and keep every other pod and volume working. Messages follow
// the API server's field-error format (k/k pkg/apis/core/validation) so they
// read the same as `kubectl apply` would have.
//
// Paths are re-checked here even for pods from the API: the API server's own
// comments say the same checks "should be done on the node".
import type { V1Pod } from '@kubernetes/client-node';
import { validateConfigMapSource } from './configmap-validation.ts';
import { validateDownwardAPISource } from './downwardapi-validation.ts';
import { validateEmptyDirSource } from './emptydir-validation.ts';
import { validateHostPathSource } from './hostpath-validation.ts';
import { validateImageSource } from './image-validation.ts';
import { validateProjectedSource } from './projected-validation.ts';
import { validateSecretSource } from './secret-validation.ts';
import {
  type Add,
  descendingPathErrors,
  isObj,
  type Obj,
  q,
  type VolumeProblem,
} from './util/field-errors.ts';
import { validateDNS1123Label } from './util/names.ts';

export type { VolumeProblem } from './util/field-errors.ts';

/** The keys of a v1 VolumeSource (k8s.io/api/core/v1 types.go, release-1.36). */
export const VOLUME_SOURCE_FIELDS: readonly string[] = [
  'awsElasticBlockStore',
  'azureDisk',
  'azureFile',
  'cephfs',
  'cinder',
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'fc',
  'flexVolume',
  'flocker',
  'gcePersistentDisk',
  'gitRepo',
  'glusterfs',
  'hostPath',
  'image',
  'iscsi',
  'nfs',
  'persistentVolumeClaim',
  'photonPersistentDisk',
  'portworxVolume',
  'projected',
  'quobyte',
  'rbd',
  'scaleIO',
  'secret',
  'storageos',
  'vsphereVolume',
];

/** Each source's own checks, kept next to its plugin; the other kinds have none on the node. */
const SOURCE_CHECKS: ReadonlyMap<string, (src: Obj, field: string, add: Add) => void> = new Map([
  ['hostPath', validateHostPathSource],
  ['emptyDir', validateEmptyDirSource],
  ['secret', validateSecretSource],
  ['configMap', validateConfigMapSource],
  ['downwardAPI', validateDownwardAPISource],
  ['projected', validateProjectedSource],
  ['image', validateImageSource],
]);

function checkSource(kind: string, src: unknown, field: string, add: Add): void {
  if (!isObj(src)) {
    add('InvalidField', `${field}: Invalid value: must be an object`);
    return;
  }
  SOURCE_CHECKS.get(kind)?.(src, field, add);
}

/** The pod's spec as the document it came from: validation trusts none of client-node's types. */
function untypedSpec(pod: V1Pod): Obj {
  const spec: unknown = pod.spec;
  return isObj(spec) ? spec : {};
}

interface ContainerList {
  field: string;
  containers: unknown;
}

function containerLists(pod: V1Pod): ContainerList[] {
  const spec = untypedSpec(pod);
  return [
    { field: 'spec.containers', containers: spec.containers },
    { field: 'spec.initContainers', containers: spec.initContainers },
    { field: 'spec.ephemeralContainers', containers: spec.ephemeralContainers },
  ];
}

/** Calls fn for every volumeMount and volumeDevice of every container kind. */
function forEachVolumeRef(
  pod: V1Pod,
  fn: (ref: Obj, field: string, kind: 'volumeMounts' | 'volumeDevices') => void,
): void {
  for (const { field, containers } of containerLists(pod)) {
    if (!Array.isArray(containers)) continue;
    containers.forEach((c, i) => {
      if (!isObj(c)) return;
      for (const kind of ['volumeMounts', 'volumeDevices'] as const) {
        const refs = c[kind];
        if (!Array.isArray(refs)) continue;
        refs.forEach((ref, j) => {
          if (isObj(ref)) fn(ref, `${field}[${i}].${kind}[${j}]`, kind);
        });
      }
    });
  }
}

/**
 * Names of the volumes some container actually mounts (volumeMounts or
 * volumeDevices of containers, initContainers and ephemeralContainers).
 * kubelet sets up only these (util.GetPodVolumeNames).
 */
export function usedVolumeNames(pod: V1Pod): Set<string> {
  const names = new Set<string>();
  forEachVolumeRef(pod, (ref) => {
    if (typeof ref.name === 'string' && ref.name !== '') names.add(ref.name);
  });
  return names;
}

/**
 * The most volumes one pod may have. Kubernetes sets no limit (etcd's object
 * size caps a pod at roughly 10,000); podvol refuses more than this so one pod
 * cannot take the node's memory and mount table (finding 5 of issue 15: 3,000
 * volumes took 1 GB). The README's Bounded work section names it.
 */
export const MAX_VOLUMES_PER_POD = 1024;

/** The problem every volume of a pod with more than MAX_VOLUMES_PER_POD volumes gets, if so. */
export function tooManyVolumes(pod: V1Pod): VolumeProblem | undefined {
  const vols = pod.spec?.volumes;
  if (!Array.isArray(vols) || vols.length <= MAX_VOLUMES_PER_POD) return undefined;
  return {
    reason: 'TooManyVolumes',
    message: `spec.volumes: Too many: ${vols.length}: must have at most ${MAX_VOLUMES_PER_POD} items (podvol's limit per pod)`,
  };
}

/**
 * Problems with the pod's volumes, keyed by volume name. A problem not tied
 * to an existing volume (a volumeMount naming a volume that does not exist)
 * is keyed by the name the mount used; an entry without a usable name by its
 * field path (e.g. `spec.volumes[2]`). An empty map means every volume is fine.
 * When a volume has several problems, reason is the first one's and message
 * lists them all.
 */
export function validatePodVolumes(pod: V1Pod): Map<string, VolumeProblem> {
  const problems = new Map<string, VolumeProblem>();
  const tooMany = tooManyVolumes(pod);
  if (tooMany) {
    // Nothing of such a pod is set up: each volume carries the one reason, and
    // no per-volume work (validation, plugin lookup) is spent on it.
    const vols: unknown[] = pod.spec?.volumes ?? [];
    vols.forEach((v, i) => {
      const name = isObj(v) && typeof v.name === 'string' && v.name !== '' ? v.name : `spec.volumes[${i}]`;
      problems.set(name, tooMany);
    });
    return problems;
  }
  const addTo =
    (key: string): Add =>
    (reason, message, nodeOnly = false) => {
      const prev = problems.get(key);
      if (!prev) problems.set(key, nodeOnly ? { reason, message, nodeOnly } : { reason, message });
      else if (!prev.message.split('; ').includes(message)) {
        prev.message += `; ${message}`;
        if (!nodeOnly) delete prev.nodeOnly;
      }
    };

  const spec = untypedSpec(pod);
  const volumes = spec.volumes ?? [];
  const names = new Set<string>();
  if (!Array.isArray(volumes)) {
    addTo('spec.volumes')('InvalidField', 'spec.volumes: Invalid value: must be a list');
  } else {
    volumes.forEach((v, i) => {
      const field = `spec.volumes[${i}]`;
      if (!isObj(v)) {
        addTo(field)('InvalidField', `${field}: Invalid value: must be an object`);
        return;
      }
      if (typeof v.name !== 'string' || v.name === '') {
        addTo(field)('InvalidVolumeName', `${field}.name: Required value`);
        return;
      }
      const name = v.name;
      const add = addTo(name);
      if (names.has(name)) {
        add('DuplicateVolumeName', `${field}.name: Duplicate value: ${q(name)}`);
        return;
      }
      names.add(name);
      for (const e of validateDNS1123Label(name))
        add('InvalidVolumeName', `${field}.name: Invalid value: ${q(name)}: ${e}`);

      const set = Object.keys(v).filter((k) => k !== 'name' && v[k] !== null && v[k] !== undefined);
      const unknown = set.filter((k) => !VOLUME_SOURCE_FIELDS.includes(k));
      const known = set.filter((k) => VOLUME_SOURCE_FIELDS.includes(k));
      if (unknown.length > 0) {
        add(
          'UnknownVolumeSource',
          `${field}: Invalid value: unknown volume source field(s) ${unknown.map(q).join(', ')}`,
        );
        return;
      }
      const [kind] = known;
      if (kind === undefined) {
        add('UnknownVolumeSource', `${field}: Required value: must specify a volume type`);
        return;
      }
      if (known.length > 1) {
        add(
          'UnknownVolumeSource',
          `${field}: Forbidden: may not specify more than 1 volume type (found ${known.map(q).join(', ')})`,
        );
        return;
      }
      // kubelet has disabled the in-tree gitRepo driver by default since 1.33
      // (GitRepoVolumeDriver gate; CVE-2024-10220, CVE-2025-1767).
      if (kind === 'gitRepo') {
        add(
          'UnknownVolumeSource',
          `${field}.gitRepo: Unsupported value: the gitRepo volume type is disabled; clone into an emptyDir from an init container instead`,
          true,
        );
        return;
      }
      checkSource(kind, v[kind], `${field}.${kind}`, add);
    });
  }

  forEachVolumeRef(pod, (ref, field, kind) => {
    const name = ref.name;
    if (typeof name !== 'string' || name === '') {
      addTo(field)('VolumeNotFound', `${field}.name: Required value`);
      return;
    }
    if (!names.has(name)) {
      addTo(name)('VolumeNotFound', `${field}.name: Not found: ${q(name)}`);
      return;
    }
    if (kind === 'volumeMounts') {
      for (const e of descendingPathErrors(ref.subPath, `${field}.subPath`, true))
        addTo(name)('InvalidPath', e.message, e.nodeOnly);
    }
  });
  return problems;
}
