// Per-volume validation of a pod. The API server rejects a whole pod for any
// of these; a node agent must instead fail just the affected volume, with a
// precise reason, and keep every other pod and volume working. Messages follow
// the API server's field-error format (k/k pkg/apis/core/validation) so they
// read the same as `kubectl apply` would have.
//
// Paths are re-checked here even for pods from the API: the API server's own
// comments say the same checks "should be done on the node".
import type { V1Pod } from '@kubernetes/client-node';
import { VOLUME_SOURCE_FIELDS } from './defaults.ts';

export interface VolumeProblem {
  /** Stable CamelCase reason shown in /status. */
  reason: string;
  message: string;
}

/** The reasons validatePodVolumes reports. */
export const VolumeReason = {
  InvalidVolumeName: 'InvalidVolumeName',
  DuplicateVolumeName: 'DuplicateVolumeName',
  UnknownVolumeSource: 'UnknownVolumeSource',
  VolumeNotFound: 'VolumeNotFound',
  InvalidPath: 'InvalidPath',
  InvalidSizeLimit: 'InvalidSizeLimit',
  InvalidMode: 'InvalidMode',
  InvalidHostPathType: 'InvalidHostPathType',
  /** Any other malformed field of a volume source (missing secretName, bad fieldRef, ...). */
  InvalidField: 'InvalidField',
} as const;

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const q = (v: unknown): string => JSON.stringify(v) ?? String(v);

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_LABEL_MSG =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/** Problems with a DNS-1123 label, worded like apimachinery's IsDNS1123Label. */
export function dns1123LabelErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1123_LABEL.test(value)) errs.push(DNS1123_LABEL_MSG);
  return errs;
}

const HOST_PATH_TYPES = [
  '',
  'BlockDevice',
  'CharDevice',
  'Directory',
  'DirectoryOrCreate',
  'File',
  'FileOrCreate',
  'Socket',
];

// AtomicWriter's limits on the node (pkg/volume/util/atomic_writer.go).
const MAX_PATH_LENGTH = 4096;
const MAX_FILE_NAME_LENGTH = 255;
const MAX_MODE = 0o777;
// The largest byte count kubelet can hold (int64); anything above is not a size, it is a typo.
const MAX_SIZE_BYTES = 2 ** 63 - 1;
const MIN_TOKEN_EXPIRATION_SECONDS = 600;
const MAX_TOKEN_EXPIRATION_SECONDS = 2 ** 32;

const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/**
 * Approximate numeric value of a Kubernetes quantity, or undefined when the
 * string is not a quantity. Private stand-in: precise enough for range checks,
 * not for arithmetic.
 */
function quantityValue(v: unknown): number | undefined {
  const s = typeof v === 'number' ? String(v) : v;
  if (typeof s !== 'string') return undefined;
  const m = QUANTITY.exec(s);
  if (!m) return undefined;
  const [, sign, num, suffix = ''] = m;
  const mult = suffix === '' ? 1 : (SUFFIX[suffix] ?? 10 ** Number(suffix.slice(1)));
  const value = Number(num) * mult;
  return sign === '-' ? -value : value;
}

const QUANTITY_MSG = "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/** Errors for a path that must stay inside the volume (items paths, subPath). */
function descendingPathErrors(path: unknown, field: string, allowEmpty = false): string[] {
  if (typeof path !== 'string') return path === undefined && allowEmpty ? [] : [`${field}: Required value`];
  if (path === '') return allowEmpty ? [] : [`${field}: Required value`];
  const errs: string[] = [];
  if (path.startsWith('/')) errs.push(`${field}: Invalid value: ${q(path)}: must be a relative path`);
  if (path.split('/').includes('..')) errs.push(`${field}: Invalid value: ${q(path)}: must not contain '..'`);
  if (path.includes('\0')) errs.push(`${field}: Invalid value: ${q(path)}: must not contain a NUL byte`);
  return errs;
}

/** validateLocalNonReservedPath + AtomicWriter's limits: paths of files a volume plugin writes. */
function payloadPathErrors(path: unknown, field: string): string[] {
  const errs = descendingPathErrors(path, field);
  if (typeof path !== 'string' || path === '') return errs;
  // `..data` and friends are AtomicWriter's own bookkeeping entries.
  if (path.startsWith('..')) errs.push(`${field}: Invalid value: ${q(path)}: must not start with '..'`);
  if (path.length > MAX_PATH_LENGTH) {
    errs.push(`${field}: Invalid value: must not be longer than ${MAX_PATH_LENGTH} characters`);
  }
  if (path.split('/').some((e) => e.length > MAX_FILE_NAME_LENGTH)) {
    errs.push(
      `${field}: Invalid value: no path element may be longer than ${MAX_FILE_NAME_LENGTH} characters`,
    );
  }
  return errs;
}

function modeError(mode: unknown, field: string): string | undefined {
  if (mode === undefined || mode === null) return undefined;
  if (typeof mode === 'number' && Number.isInteger(mode) && mode >= 0 && mode <= MAX_MODE) return undefined;
  return `${field}: Invalid value: ${q(mode)}: must be a number between 0 and 0777 (octal), both inclusive`;
}

const DOWNWARD_FIELD_PATHS = [
  'metadata.annotations',
  'metadata.labels',
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  // Allowed on top of the API server's list for volumes (it allows them for env only); see fieldpath.ts.
  'spec.nodeName',
  'spec.serviceAccountName',
  'status.hostIP',
];
const SUBSCRIPTED_FIELD_PATH = /^metadata\.(labels|annotations)\['[^']+'\]$/;
const RESOURCE_NAMES = [
  'limits.cpu',
  'limits.ephemeral-storage',
  'limits.memory',
  'requests.cpu',
  'requests.ephemeral-storage',
  'requests.memory',
];
const CPU_DIVISORS = [1e-3, 1];
const BYTE_DIVISORS = [
  1,
  1e3,
  1e6,
  1e9,
  1e12,
  1e15,
  1e18,
  2 ** 10,
  2 ** 20,
  2 ** 30,
  2 ** 40,
  2 ** 50,
  2 ** 60,
];

type Add = (reason: string, message: string) => void;

/**
 * The checks every `items` entry shares (a list of objects, each with a safe
 * relative path, a valid mode and, in a projected volume, a path of its own);
 * `more` adds the checks of its kind.
 */
function checkItems(
  items: unknown,
  field: string,
  add: Add,
  paths: Set<string> | undefined,
  more: (item: Obj, f: string) => void,
): void {
  if (items === undefined || items === null) return;
  if (!Array.isArray(items)) {
    add(VolumeReason.InvalidField, `${field}: Invalid value: must be a list`);
    return;
  }
  items.forEach((item, i) => {
    const f = `${field}[${i}]`;
    if (!isObj(item)) {
      add(VolumeReason.InvalidField, `${f}: Invalid value: must be an object`);
      return;
    }
    more(item, f);
    for (const e of payloadPathErrors(item.path, `${f}.path`)) add(VolumeReason.InvalidPath, e);
    const me = modeError(item.mode, `${f}.mode`);
    if (me) add(VolumeReason.InvalidMode, me);
    notePath(item.path, f, add, paths);
  });
}

function checkKeyToPaths(items: unknown, field: string, add: Add, paths?: Set<string>): void {
  checkItems(items, field, add, paths, (item, f) => {
    if (typeof item.key !== 'string' || item.key === '')
      add(VolumeReason.InvalidField, `${f}.key: Required value`);
  });
}

// Projected sources share one directory: two files at the same path would overwrite each other.
function notePath(path: unknown, field: string, add: Add, paths?: Set<string>): void {
  if (!paths || typeof path !== 'string' || path === '') return;
  if (paths.has(path))
    add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(path)}: conflicting duplicate paths`);
  paths.add(path);
}

function checkDownwardItems(items: unknown, field: string, add: Add, paths?: Set<string>): void {
  checkItems(items, field, add, paths, (item, f) => {
    const hasField = isObj(item.fieldRef);
    const hasResource = isObj(item.resourceFieldRef);
    if (hasField && hasResource) {
      add(
        VolumeReason.InvalidField,
        `${f}: Invalid value: fieldRef and resourceFieldRef can not be specified simultaneously`,
      );
    } else if (!hasField && !hasResource) {
      add(
        VolumeReason.InvalidField,
        `${f}: Required value: one of fieldRef and resourceFieldRef must be specified`,
      );
    }
    if (isObj(item.fieldRef)) checkFieldRef(item.fieldRef, `${f}.fieldRef`, add);
    if (isObj(item.resourceFieldRef))
      checkResourceFieldRef(item.resourceFieldRef, `${f}.resourceFieldRef`, add);
  });
}

function checkFieldRef(ref: Obj, field: string, add: Add): void {
  if (ref.apiVersion !== undefined && ref.apiVersion !== 'v1') {
    add(
      VolumeReason.InvalidField,
      `${field}.apiVersion: Unsupported value: ${q(ref.apiVersion)}: supported values: "v1"`,
    );
  }
  const p = ref.fieldPath;
  if (typeof p !== 'string' || p === '') {
    add(VolumeReason.InvalidField, `${field}.fieldPath: Required value`);
    return;
  }
  if (DOWNWARD_FIELD_PATHS.includes(p) || SUBSCRIPTED_FIELD_PATH.test(p)) return;
  add(
    VolumeReason.InvalidField,
    `${field}.fieldPath: Unsupported value: ${q(p)}: unsupported fieldPath for a downwardAPI volume; supported values: ${DOWNWARD_FIELD_PATHS.map(q).join(', ')} and metadata.labels['<key>'], metadata.annotations['<key>']`,
  );
}

function checkResourceFieldRef(ref: Obj, field: string, add: Add): void {
  if (typeof ref.containerName !== 'string' || ref.containerName === '') {
    add(VolumeReason.InvalidField, `${field}.containerName: Required value`);
  }
  const r = ref.resource;
  if (typeof r !== 'string' || r === '') {
    add(VolumeReason.InvalidField, `${field}.resource: Required value`);
    return;
  }
  const hugepages = /^(limits|requests)\.hugepages-/.test(r);
  if (!RESOURCE_NAMES.includes(r) && !hugepages) {
    add(
      VolumeReason.InvalidField,
      `${field}.resource: Unsupported value: ${q(r)}: supported values: ${RESOURCE_NAMES.map(q).join(', ')}, "limits.hugepages-<size>", "requests.hugepages-<size>"`,
    );
    return;
  }
  if (ref.divisor === undefined || ref.divisor === null) return;
  const d = quantityValue(ref.divisor);
  const allowed = r.endsWith('.cpu') ? CPU_DIVISORS : BYTE_DIVISORS;
  if (d === undefined || !allowed.some((a) => Math.abs(a - d) <= a * 1e-9)) {
    const supported = r.endsWith('.cpu')
      ? '"1m", "1"'
      : '"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"';
    add(
      VolumeReason.InvalidField,
      `${field}.divisor: Unsupported value: ${q(ref.divisor)}: supported values: ${supported}`,
    );
  }
}

function checkHostPath(src: Obj, field: string, add: Add): void {
  const p = src.path;
  if (typeof p !== 'string' || p === '') {
    add(VolumeReason.InvalidPath, `${field}.path: Required value`);
  } else {
    // The API server accepts a relative path; on a node agent it would resolve
    // against the daemon's working directory, so it is refused here.
    if (!p.startsWith('/'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must be an absolute path`);
    if (p.split('/').includes('..'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must not contain '..'`);
    if (p.includes('\0'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must not contain a NUL byte`);
  }
  const t = src.type ?? '';
  if (typeof t !== 'string' || !HOST_PATH_TYPES.includes(t)) {
    add(
      VolumeReason.InvalidHostPathType,
      `${field}.type: Unsupported value: ${q(t)}: supported values: ${HOST_PATH_TYPES.map(q).join(', ')}`,
    );
  }
}

function checkEmptyDir(src: Obj, field: string, add: Add): void {
  const medium = src.medium ?? '';
  if (
    typeof medium !== 'string' ||
    !(medium === '' || medium === 'Memory' || /^HugePages(-.+)?$/.test(medium))
  ) {
    add(
      VolumeReason.InvalidField,
      `${field}.medium: Unsupported value: ${q(medium)}: supported values: "", "Memory", "HugePages", "HugePages-<size>"`,
    );
  }
  const limit = src.sizeLimit;
  if (limit === undefined || limit === null) return;
  const f = `${field}.sizeLimit`;
  const value = quantityValue(limit);
  if (value === undefined) {
    add(VolumeReason.InvalidSizeLimit, `${f}: Invalid value: ${q(limit)}: ${QUANTITY_MSG}`);
    return;
  }
  if (value < 0) {
    add(
      VolumeReason.InvalidSizeLimit,
      `${f}: Invalid value: ${q(limit)}: must be greater than or equal to 0`,
    );
    return;
  }
  if (value > MAX_SIZE_BYTES) {
    add(
      VolumeReason.InvalidSizeLimit,
      `${f}: Invalid value: ${q(limit)}: must be at most 2^63-1 bytes (about 8Ei)`,
    );
  }
}

function checkObjectName(src: Obj, key: string, field: string, add: Add): void {
  if (typeof src[key] !== 'string' || src[key] === '')
    add(VolumeReason.InvalidField, `${field}.${key}: Required value`);
}

const PROJECTION_FIELDS = [
  'clusterTrustBundle',
  'configMap',
  'downwardAPI',
  'podCertificate',
  'secret',
  'serviceAccountToken',
];

function checkProjected(src: Obj, field: string, add: Add): void {
  const me = modeError(src.defaultMode, `${field}.defaultMode`);
  if (me) add(VolumeReason.InvalidMode, me);
  const sources = src.sources ?? [];
  if (!Array.isArray(sources)) {
    add(VolumeReason.InvalidField, `${field}.sources: Invalid value: must be a list`);
    return;
  }
  const paths = new Set<string>();
  sources.forEach((s, i) => {
    const f = `${field}.sources[${i}]`;
    if (!isObj(s)) {
      add(VolumeReason.InvalidField, `${f}: Invalid value: must be an object`);
      return;
    }
    const set = Object.keys(s).filter((k) => s[k] !== null && s[k] !== undefined);
    const unknown = set.filter((k) => !PROJECTION_FIELDS.includes(k));
    if (unknown.length > 0) {
      add(
        VolumeReason.UnknownVolumeSource,
        `${f}: Invalid value: unknown projection field(s) ${unknown.map(q).join(', ')}`,
      );
      return;
    }
    if (set.length !== 1) {
      add(
        VolumeReason.UnknownVolumeSource,
        set.length === 0
          ? `${f}: Required value: must specify exactly one projection type`
          : `${f}: Forbidden: may not specify more than 1 projection type (found ${set.map(q).join(', ')})`,
      );
      return;
    }
    const kind = set[0];
    const p = s[kind];
    const pf = `${f}.${kind}`;
    if (!isObj(p)) {
      add(VolumeReason.InvalidField, `${pf}: Invalid value: must be an object`);
      return;
    }
    if (kind === 'secret' || kind === 'configMap') checkKeyToPaths(p.items, `${pf}.items`, add, paths);
    if (kind === 'downwardAPI') checkDownwardItems(p.items, `${pf}.items`, add, paths);
    if (kind === 'serviceAccountToken' || kind === 'clusterTrustBundle') {
      for (const e of payloadPathErrors(p.path, `${pf}.path`)) add(VolumeReason.InvalidPath, e);
      notePath(p.path, pf, add, paths);
    }
    if (kind === 'serviceAccountToken' && p.expirationSeconds !== undefined && p.expirationSeconds !== null) {
      const e = p.expirationSeconds;
      const ef = `${pf}.expirationSeconds`;
      if (typeof e !== 'number' || !Number.isInteger(e)) {
        add(VolumeReason.InvalidField, `${ef}: Invalid value: ${q(e)}: must be an integer number of seconds`);
      } else if (e < MIN_TOKEN_EXPIRATION_SECONDS) {
        add(
          VolumeReason.InvalidField,
          `${ef}: Invalid value: ${e}: may not specify a duration less than 10 minutes`,
        );
      } else if (e > MAX_TOKEN_EXPIRATION_SECONDS) {
        add(
          VolumeReason.InvalidField,
          `${ef}: Invalid value: ${e}: may not specify a duration larger than 2^32 seconds`,
        );
      }
    }
  });
}

function checkSource(kind: string, src: unknown, field: string, add: Add): void {
  if (!isObj(src)) {
    add(VolumeReason.InvalidField, `${field}: Invalid value: must be an object`);
    return;
  }
  switch (kind) {
    case 'hostPath': {
      checkHostPath(src, field, add);
      return;
    }
    case 'emptyDir': {
      checkEmptyDir(src, field, add);
      return;
    }
    case 'secret':
    case 'configMap': {
      checkObjectName(src, kind === 'secret' ? 'secretName' : 'name', field, add);
      const me = modeError(src.defaultMode, `${field}.defaultMode`);
      if (me) add(VolumeReason.InvalidMode, me);
      checkKeyToPaths(src.items, `${field}.items`, add);
      return;
    }
    case 'downwardAPI': {
      const me = modeError(src.defaultMode, `${field}.defaultMode`);
      if (me) add(VolumeReason.InvalidMode, me);
      checkDownwardItems(src.items, `${field}.items`, add);
      return;
    }
    case 'projected': {
      checkProjected(src, field, add);
      return;
    }
  }
}

interface ContainerList {
  field: string;
  containers: unknown;
}

function containerLists(pod: V1Pod): ContainerList[] {
  const spec: Obj = isObj(pod.spec) ? (pod.spec as Obj) : {};
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
 * Problems with the pod's volumes, keyed by volume name. A problem not tied
 * to an existing volume (a volumeMount naming a volume that does not exist)
 * is keyed by the name the mount used; an entry without a usable name by its
 * field path (e.g. `spec.volumes[2]`). An empty map means every volume is fine.
 * When a volume has several problems, reason is the first one's and message
 * lists them all.
 */
export function validatePodVolumes(pod: V1Pod): Map<string, VolumeProblem> {
  const problems = new Map<string, VolumeProblem>();
  const addTo =
    (key: string): Add =>
    (reason, message) => {
      const prev = problems.get(key);
      if (!prev) problems.set(key, { reason, message });
      else if (!prev.message.split('; ').includes(message)) prev.message += `; ${message}`;
    };

  const spec: Obj = isObj(pod.spec) ? (pod.spec as Obj) : {};
  const volumes = spec.volumes ?? [];
  const names = new Set<string>();
  if (!Array.isArray(volumes)) {
    addTo('spec.volumes')(VolumeReason.InvalidField, 'spec.volumes: Invalid value: must be a list');
  } else {
    volumes.forEach((v, i) => {
      const field = `spec.volumes[${i}]`;
      if (!isObj(v)) {
        addTo(field)(VolumeReason.InvalidField, `${field}: Invalid value: must be an object`);
        return;
      }
      if (typeof v.name !== 'string' || v.name === '') {
        addTo(field)(VolumeReason.InvalidVolumeName, `${field}.name: Required value`);
        return;
      }
      const name = v.name;
      const add = addTo(name);
      if (names.has(name)) {
        add(VolumeReason.DuplicateVolumeName, `${field}.name: Duplicate value: ${q(name)}`);
        return;
      }
      names.add(name);
      for (const e of dns1123LabelErrors(name))
        add(VolumeReason.InvalidVolumeName, `${field}.name: Invalid value: ${q(name)}: ${e}`);

      const set = Object.keys(v).filter((k) => k !== 'name' && v[k] !== null && v[k] !== undefined);
      const unknown = set.filter((k) => !VOLUME_SOURCE_FIELDS.includes(k));
      const known = set.filter((k) => VOLUME_SOURCE_FIELDS.includes(k));
      if (unknown.length > 0) {
        add(
          VolumeReason.UnknownVolumeSource,
          `${field}: Invalid value: unknown volume source field(s) ${unknown.map(q).join(', ')}`,
        );
        return;
      }
      if (known.length === 0) {
        add(VolumeReason.UnknownVolumeSource, `${field}: Required value: must specify a volume type`);
        return;
      }
      if (known.length > 1) {
        add(
          VolumeReason.UnknownVolumeSource,
          `${field}: Forbidden: may not specify more than 1 volume type (found ${known.map(q).join(', ')})`,
        );
        return;
      }
      // kubelet has disabled the in-tree gitRepo driver by default since 1.33
      // (GitRepoVolumeDriver gate; CVE-2024-10220, CVE-2025-1767).
      if (known[0] === 'gitRepo') {
        add(
          VolumeReason.UnknownVolumeSource,
          `${field}.gitRepo: Unsupported value: the gitRepo volume type is disabled; clone into an emptyDir from an init container instead`,
        );
        return;
      }
      checkSource(known[0], v[known[0]], `${field}.${known[0]}`, add);
    });
  }

  forEachVolumeRef(pod, (ref, field, kind) => {
    const name = ref.name;
    if (typeof name !== 'string' || name === '') {
      addTo(field)(VolumeReason.VolumeNotFound, `${field}.name: Required value`);
      return;
    }
    if (!names.has(name)) {
      addTo(name)(VolumeReason.VolumeNotFound, `${field}.name: Not found: ${q(name)}`);
      return;
    }
    if (kind === 'volumeMounts') {
      for (const e of descendingPathErrors(ref.subPath, `${field}.subPath`, true))
        addTo(name)(VolumeReason.InvalidPath, e);
    }
  });
  return problems;
}
