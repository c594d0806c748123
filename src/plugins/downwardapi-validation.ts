// downwardAPI's validation: items with fieldRef or resourceFieldRef, shared
// with the downwardAPI projection of projected volumes.
import {
  type Add,
  checkItems,
  isObj,
  modeError,
  type Obj,
  type ProjectedPaths,
  QUANTITY_MSG,
  q,
} from './util/field-errors.ts';
import { formatQuantity, parseQuantity } from './util/quantity.ts';

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
// validContainerResourceDivisorFor*: compared with the divisor's canonical form (Quantity.String()).
const CPU_DIVISORS = ['1m', '1'];
const BYTE_DIVISORS = ['1', '1k', '1M', '1G', '1T', '1P', '1E', '1Ki', '1Mi', '1Gi', '1Ti', '1Pi', '1Ei'];

/** The divisor's canonical form; undefined when it is not a quantity. */
function canonical(divisor: unknown): string | undefined {
  try {
    return formatQuantity(parseQuantity(String(divisor)));
  } catch {
    return undefined;
  }
}

export function checkDownwardItems(items: unknown, field: string, add: Add, paths?: ProjectedPaths): void {
  checkItems(items, field, add, paths, (item, f) => {
    const hasField = isObj(item.fieldRef);
    const hasResource = isObj(item.resourceFieldRef);
    if (hasField && hasResource) {
      add(
        'InvalidField',
        `${f}: Invalid value: fieldRef and resourceFieldRef can not be specified simultaneously`,
      );
    } else if (!hasField && !hasResource) {
      add('InvalidField', `${f}: Required value: one of fieldRef and resourceFieldRef must be specified`);
    }
    if (isObj(item.fieldRef)) checkFieldRef(item.fieldRef, `${f}.fieldRef`, add);
    if (isObj(item.resourceFieldRef))
      checkResourceFieldRef(item.resourceFieldRef, `${f}.resourceFieldRef`, add);
  });
}

function checkFieldRef(ref: Obj, field: string, add: Add): void {
  if (ref.apiVersion !== undefined && ref.apiVersion !== 'v1') {
    add(
      'InvalidField',
      `${field}.apiVersion: Unsupported value: ${q(ref.apiVersion)}: supported values: "v1"`,
    );
  }
  const p = ref.fieldPath;
  if (typeof p !== 'string' || p === '') {
    add('InvalidField', `${field}.fieldPath: Required value`);
    return;
  }
  if (DOWNWARD_FIELD_PATHS.includes(p) || SUBSCRIPTED_FIELD_PATH.test(p)) return;
  add(
    'InvalidField',
    `${field}.fieldPath: Unsupported value: ${q(p)}: unsupported fieldPath for a downwardAPI volume; supported values: ${DOWNWARD_FIELD_PATHS.map(q).join(', ')} and metadata.labels['<key>'], metadata.annotations['<key>']`,
  );
}

/** validateContainerResourceFieldSelector (volume = true) and validateContainerResourceDivisor. */
function checkResourceFieldRef(ref: Obj, field: string, add: Add): void {
  const r = typeof ref.resource === 'string' ? ref.resource : '';
  if (typeof ref.containerName !== 'string' || ref.containerName === '') {
    add('InvalidField', `${field}.containerName: Required value`);
  } else if (r === '') {
    add('InvalidField', `${field}.resource: Required value`);
  } else if (!RESOURCE_NAMES.includes(r) && !/^(limits|requests)\.hugepages-/.test(r)) {
    add(
      'InvalidField',
      `${field}.resource: Unsupported value: ${q(r)}: supported values: ${RESOURCE_NAMES.map(q).join(', ')}`,
    );
  }
  if (ref.divisor === undefined || ref.divisor === null) return;
  const d = canonical(ref.divisor);
  if (d === undefined) {
    add('InvalidField', `${field}.divisor: Invalid value: ${q(ref.divisor)}: ${QUANTITY_MSG}`);
    return;
  }
  // A zero divisor is an unset one: client-go's typed structs always send "0".
  if (d === '0') return;
  const wrong = (what: string, values: string) =>
    add(
      'InvalidField',
      `${field}.divisor: Invalid value: ${q(r)}: only divisor's values ${values} are supported with the ${what}`,
    );
  const bytes = '1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei';
  if ((r === 'limits.cpu' || r === 'requests.cpu') && !CPU_DIVISORS.includes(d))
    wrong('cpu resource', '1m and 1');
  if ((r === 'limits.memory' || r === 'requests.memory') && !BYTE_DIVISORS.includes(d))
    wrong('memory resource', bytes);
  if ((r === 'limits.ephemeral-storage' || r === 'requests.ephemeral-storage') && !BYTE_DIVISORS.includes(d))
    wrong('local ephemeral storage resource', bytes);
  if (/^(limits|requests)\.hugepages-/.test(r) && !BYTE_DIVISORS.includes(d))
    wrong('hugepages resource', bytes);
}

export function validateDownwardAPISource(src: Obj, field: string, add: Add): void {
  const me = modeError(src.defaultMode, `${field}.defaultMode`);
  if (me) add('InvalidMode', me);
  checkDownwardItems(src.items, `${field}.items`, add);
}
