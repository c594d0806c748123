// The field-error vocabulary every volume source's validation shares: the API
// server's message format (k/k pkg/apis/core/validation), paths that must stay
// inside the volume, file modes and the `items` lists of KeyToPath/downwardAPI.

import type { VolumeReason } from '../../reasons.ts';
import { hasBacksteps } from '../../volumehost/paths.ts';

export interface VolumeProblem {
  reason: VolumeReason;
  message: string;
  /**
   * True when only the node refuses it (the API server admits such a pod:
   * a disabled plugin, a path no filesystem can hold). A static pod is refused
   * as a whole only for problems the API server would reject too.
   */
  nodeOnly?: true;
}

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const q = (v: unknown): string => JSON.stringify(v) ?? String(v);

const MAX_MODE = 0o777;

export const QUANTITY_MSG =
  "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/** Records one problem of the volume being checked; `nodeOnly` when the API server would admit it. */
export type Add = (reason: VolumeReason, message: string, nodeOnly?: boolean) => void;

/** One field error, with whether only the node refuses it. */
export interface FieldError {
  message: string;
  nodeOnly?: boolean;
}

/** `path` holds a NUL byte: the API server stores it, but no system call can use it. */
export function nulByteError(path: string, field: string): FieldError[] {
  return path.includes('\0')
    ? [{ message: `${field}: Invalid value: ${q(path)}: must not contain a NUL byte`, nodeOnly: true }]
    : [];
}

/**
 * validateLocalDescendingPath (items paths, subPath): relative, no `..` element
 * (one error even for `../..`, as upstream).
 */
export function descendingPathErrors(path: unknown, field: string, allowEmpty = false): FieldError[] {
  if (typeof path !== 'string')
    return path === undefined && allowEmpty ? [] : [{ message: `${field}: Required value` }];
  if (path === '') return allowEmpty ? [] : [{ message: `${field}: Required value` }];
  const errs: FieldError[] = [];
  if (path.startsWith('/'))
    errs.push({ message: `${field}: Invalid value: ${q(path)}: must be a relative path` });
  if (hasBacksteps(path))
    errs.push({ message: `${field}: Invalid value: ${q(path)}: must not contain '..'` });
  errs.push(...nulByteError(path, field));
  return errs;
}

/**
 * ValidateLocalNonReservedPath: the paths of files a volume plugin writes. The
 * atomic writer's length limits are checked when it writes, as in kubelet.
 */
export function payloadPathErrors(path: unknown, field: string): FieldError[] {
  const errs = descendingPathErrors(path, field);
  if (typeof path !== 'string' || path === '') return errs;
  // `..data` and friends are AtomicWriter's own bookkeeping entries. Upstream does
  // not report this when the `..` element check already caught it.
  if (path.startsWith('..') && !path.startsWith('../'))
    errs.push({ message: `${field}: Invalid value: ${q(path)}: must not start with '..'` });
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
  paths: ProjectedPaths | undefined,
  more: (item: Obj, f: string) => void,
): void {
  if (items === undefined || items === null) return;
  if (!Array.isArray(items)) {
    add('InvalidField', `${field}: Invalid value: must be a list`);
    return;
  }
  items.forEach((item, i) => {
    const f = `${field}[${i}]`;
    if (!isObj(item)) {
      add('InvalidField', `${f}: Invalid value: must be an object`);
      return;
    }
    more(item, f);
    for (const e of payloadPathErrors(item.path, `${f}.path`)) add('InvalidPath', e.message, e.nodeOnly);
    const me = modeError(item.mode, `${f}.mode`);
    if (me) add('InvalidMode', me);
    notePath(item.path, f, add, paths);
  });
}

export function checkKeyToPaths(items: unknown, field: string, add: Add, paths?: ProjectedPaths): void {
  checkItems(items, field, add, paths, (item, f) => {
    if (typeof item.key !== 'string' || item.key === '') add('InvalidField', `${f}.key: Required value`);
  });
}

/** The paths a projected volume's sources write so far; errors name the projected field, as upstream. */
export class ProjectedPaths extends Set<string> {
  readonly field: string;
  constructor(field: string) {
    super();
    this.field = field;
  }
}

// Projected sources share one directory: two files at the same path would overwrite each other.
export function notePath(path: unknown, _field: string, add: Add, paths?: ProjectedPaths): void {
  if (!paths || typeof path !== 'string' || path === '') return;
  if (paths.has(path))
    add('InvalidPath', `${paths.field}: Invalid value: ${q(path)}: conflicting duplicate paths`);
  paths.add(path);
}

export function checkObjectName(src: Obj, key: string, field: string, add: Add): void {
  if (typeof src[key] !== 'string' || src[key] === '') add('InvalidField', `${field}.${key}: Required value`);
}
