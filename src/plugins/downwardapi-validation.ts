// downwardAPI's validation: items with fieldRef or resourceFieldRef, shared
// with the downwardAPI projection of projected volumes.
import {
  type Add,
  checkItems,
  isObj,
  modeError,
  type Obj,
  q,
  quantityValue,
  VolumeReason,
} from './util/field-errors.ts';

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

export function checkDownwardItems(items: unknown, field: string, add: Add, paths?: Set<string>): void {
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

export function validateDownwardAPISource(src: Obj, field: string, add: Add): void {
  const me = modeError(src.defaultMode, `${field}.defaultMode`);
  if (me) add(VolumeReason.InvalidMode, me);
  checkDownwardItems(src.items, `${field}.items`, add);
}
