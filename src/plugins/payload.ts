// kubelet's configmap.MakePayload and secret.MakePayload, the fetch of the
// object a volume names and the rules about optional objects, shared by the
// configMap, secret and projected plugins.
import type { V1ConfigMap, V1KeyToPath, V1Secret } from '@kubernetes/client-node';
import { errorMessage } from '../errno.ts';
import { ownValue } from '../own.ts';
import type { VolumeReason } from '../reasons.ts';
import { ApiError } from '../volumehost/errors.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { VolumeError } from '../volumehost/volume.ts';
import type { FileProjection } from './util/atomic-writer.ts';

/** True for the host's NotFound (the object does not exist). */
export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.reason === 'NotFound';
}

/** The reason /status shows for an error fetching an object. */
export function fetchErrorReason(kind: 'Secret' | 'ConfigMap', err: unknown): VolumeReason {
  const reason = err instanceof ApiError ? err.reason : undefined;
  if (reason === 'NotFound') return kind === 'Secret' ? 'SecretNotFound' : 'ConfigMapNotFound';
  if (reason === 'StandaloneMode' || reason === 'Forbidden') return reason;
  if (reason === 'NotRegistered') return 'ObjectNotRegistered';
  return kind === 'Secret' ? 'SecretFetchFailed' : 'ConfigMapFetchFailed';
}

function fetchError(kind: 'Secret' | 'ConfigMap', err: unknown): VolumeError {
  if (err instanceof VolumeError) return err;
  return new VolumeError(fetchErrorReason(kind, err), errorMessage(err), {
    cause: err,
  });
}

/** A volume's defaultMode, which defaulting always sets: its absence is an error. */
export function requireMode(defaultMode: number | undefined): number {
  if (defaultMode === undefined || defaultMode === null) {
    throw new VolumeError('InvalidMode', 'no defaultMode used, not even the default value for it');
  }
  return defaultMode;
}

const fromBase64 = (v: string) => Buffer.from(v, 'base64');

function build(
  items: V1KeyToPath[] | undefined,
  lookup: (key: string) => Uint8Array | undefined,
  allKeys: () => [string, Uint8Array][],
  defaultMode: number | undefined,
  optional: boolean,
  missing: (key: string) => string,
): Map<string, FileProjection> {
  const mode = requireMode(defaultMode);
  const payload = new Map<string, FileProjection>();
  if (!items || items.length === 0) {
    for (const [k, data] of allKeys()) payload.set(k, { data, mode });
    return payload;
  }
  for (const item of items) {
    const data = lookup(item.key);
    if (data === undefined) {
      if (optional) continue;
      throw new VolumeError('KeyNotFound', missing(item.key));
    }
    payload.set(item.path, { data, mode: item.mode ?? mode });
  }
  return payload;
}

function configMapPayload(
  items: V1KeyToPath[] | undefined,
  cm: V1ConfigMap,
  defaultMode: number | undefined,
  optional: boolean,
): Map<string, FileProjection> {
  const data = cm.data ?? {};
  const binary = cm.binaryData ?? {};
  return build(
    items,
    (k) => {
      const text = ownValue(data, k);
      if (text !== undefined) return Buffer.from(text, 'utf8');
      const bytes = ownValue(binary, k);
      return bytes === undefined ? undefined : fromBase64(bytes);
    },
    () => [
      ...Object.entries(data).map(([k, v]): [string, Uint8Array] => [k, Buffer.from(v, 'utf8')]),
      ...Object.entries(binary).map(([k, v]): [string, Uint8Array] => [k, fromBase64(v)]),
    ],
    defaultMode,
    optional,
    (k) => `configmap references non-existent config key: ${k}`,
  );
}

function secretPayload(
  items: V1KeyToPath[] | undefined,
  secret: V1Secret,
  defaultMode: number | undefined,
  optional: boolean,
): Map<string, FileProjection> {
  const data = secret.data ?? {};
  return build(
    items,
    (k) => {
      const value = ownValue(data, k);
      return value === undefined ? undefined : fromBase64(value);
    },
    () => Object.entries(data).map(([k, v]): [string, Uint8Array] => [k, fromBase64(v)]),
    defaultMode,
    optional,
    (k) => `references non-existent secret key: ${k}`,
  );
}

/** What a secret or configMap volume, or projected source, says about its object. */
export interface ObjectRef {
  name: string;
  items?: V1KeyToPath[];
  optional?: boolean;
}

type Payload<T> = (
  items: V1KeyToPath[] | undefined,
  obj: T,
  defaultMode: number | undefined,
  optional: boolean,
) => Map<string, FileProjection>;

/**
 * The files of an object a volume names: fetched (an optional one that does
 * not exist stands for an empty one; any other failure is a VolumeError with
 * its /status reason), then its keys.
 */
async function objectFiles<T>(
  kind: 'Secret' | 'ConfigMap',
  fetch: () => Promise<T>,
  empty: T,
  payload: Payload<T>,
  ref: ObjectRef,
  defaultMode: number | undefined,
): Promise<Map<string, FileProjection>> {
  const optional = ref.optional === true;
  let obj: T;
  try {
    obj = await fetch();
  } catch (err) {
    if (!optional || !isNotFound(err)) throw fetchError(kind, err);
    obj = empty;
  }
  return payload(ref.items, obj, defaultMode, optional);
}

/** The files of a secret volume (or projected source). */
export const secretFiles = (
  host: VolumeHost,
  namespace: string,
  ref: ObjectRef,
  defaultMode: number | undefined,
) =>
  objectFiles('Secret', () => host.getSecretFunc()(namespace, ref.name), {}, secretPayload, ref, defaultMode);

/** The files of a configMap volume (or projected source). */
export const configMapFiles = (
  host: VolumeHost,
  namespace: string,
  ref: ObjectRef,
  defaultMode: number | undefined,
) =>
  objectFiles(
    'ConfigMap',
    () => host.getConfigMapFunc()(namespace, ref.name),
    {},
    configMapPayload,
    ref,
    defaultMode,
  );
