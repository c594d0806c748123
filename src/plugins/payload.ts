// kubelet's configmap.MakePayload and secret.MakePayload, and the rules
// about optional objects, shared by the configMap, secret and projected plugins.
import type { V1ConfigMap, V1KeyToPath, V1Secret } from '@kubernetes/client-node';
import { ownValue } from '../own.ts';
import type { VolumeReason } from '../reasons.ts';
import { ApiError } from '../volumehost/errors.ts';
import { VolumeError } from './types.ts';
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

export function fetchError(kind: 'Secret' | 'ConfigMap', err: unknown): VolumeError {
  if (err instanceof VolumeError) return err;
  return new VolumeError(fetchErrorReason(kind, err), err instanceof Error ? err.message : String(err), {
    cause: err,
  });
}

function requireMode(defaultMode: number | undefined): number {
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

export function configMapPayload(
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

export function secretPayload(
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

/** An optional object that does not exist stands for an empty one. */
export async function fetchOptional<T>(fetch: () => Promise<T>, empty: T, optional: boolean): Promise<T> {
  try {
    return await fetch();
  } catch (err) {
    if (optional && isNotFound(err)) return empty;
    throw err;
  }
}
