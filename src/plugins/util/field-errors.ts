// The field-error vocabulary every volume source's validation shares: the API
// server's message format (k/k pkg/apis/core/validation), paths that must stay
// inside the volume, file modes and the `items` lists of KeyToPath/downwardAPI.

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

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const q = (v: unknown): string => JSON.stringify(v) ?? String(v);

// AtomicWriter's limits on the node (pkg/volume/util/atomic_writer.go).
const MAX_PATH_LENGTH = 4096;
const MAX_FILE_NAME_LENGTH = 255;
const MAX_MODE = 0o777;

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
export function quantityValue(v: unknown): number | undefined {
  const s = typeof v === 'number' ? String(v) : v;
  if (typeof s !== 'string') return undefined;
  const m = QUANTITY.exec(s);
  if (!m) return undefined;
  const [, sign, num, suffix = ''] = m;
  const mult = suffix === '' ? 1 : (SUFFIX[suffix] ?? 10 ** Number(suffix.slice(1)));
  const value = Number(num) * mult;
  return sign === '-' ? -value : value;
}

export const QUANTITY_MSG =
  "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/** Records one problem of the volume being checked. */
export type Add = (reason: string, message: string) => void;

/** Errors for a path that must stay inside the volume (items paths, subPath). */
export function descendingPathErrors(path: unknown, field: string, allowEmpty = false): string[] {
  if (typeof path !== 'string') return path === undefined && allowEmpty ? [] : [`${field}: Required value`];
  if (path === '') return allowEmpty ? [] : [`${field}: Required value`];
  const errs: string[] = [];
  if (path.startsWith('/')) errs.push(`${field}: Invalid value: ${q(path)}: must be a relative path`);
  if (path.split('/').includes('..')) errs.push(`${field}: Invalid value: ${q(path)}: must not contain '..'`);
  if (path.includes('\0')) errs.push(`${field}: Invalid value: ${q(path)}: must not contain a NUL byte`);
  return errs;
}

/** validateLocalNonReservedPath + AtomicWriter's limits: paths of files a volume plugin writes. */
export function payloadPathErrors(path: unknown, field: string): string[] {
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

export function modeError(mode: unknown, field: string): string | undefined {
  if (mode === undefined || mode === null) return undefined;
  if (typeof mode === 'number' && Number.isInteger(mode) && mode >= 0 && mode <= MAX_MODE) return undefined;
  return `${field}: Invalid value: ${q(mode)}: must be a number between 0 and 0777 (octal), both inclusive`;
}

/**
 * The checks every `items` entry shares (a list of objects, each with a safe
 * relative path, a valid mode and, in a projected volume, a path of its own);
 * `more` adds the checks of its kind.
 */
export function checkItems(
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

export function checkKeyToPaths(items: unknown, field: string, add: Add, paths?: Set<string>): void {
  checkItems(items, field, add, paths, (item, f) => {
    if (typeof item.key !== 'string' || item.key === '')
      add(VolumeReason.InvalidField, `${f}.key: Required value`);
  });
}

// Projected sources share one directory: two files at the same path would overwrite each other.
export function notePath(path: unknown, field: string, add: Add, paths?: Set<string>): void {
  if (!paths || typeof path !== 'string' || path === '') return;
  if (paths.has(path))
    add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(path)}: conflicting duplicate paths`);
  paths.add(path);
}

export function checkObjectName(src: Obj, key: string, field: string, add: Add): void {
  if (typeof src[key] !== 'string' || src[key] === '')
    add(VolumeReason.InvalidField, `${field}.${key}: Required value`);
}
