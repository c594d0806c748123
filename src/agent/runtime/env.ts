// A container's environment as kubelet computes it for subPathExpr
// (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables, expansion from
// third_party/forked/golang/expansion, ExpandContainerVolumeMounts in
// pkg/kubelet/container/helpers.go). podvol serves no Service environment
// variables (it has no service lister, like a kubelet without a master).
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ownValue } from '../../own.ts';
import { isNotFound } from '../../plugins/payload.ts';
import { extractResourceValue, podFieldSelectorRuntimeValue } from '../../plugins/util/fieldpath.ts';
import type { VolumeHost } from '../../volumehost/types.ts';

/**
 * expansion.Expand: `$(NAME)` is replaced by mapping(NAME), `$$` is a
 * literal `$`, an unclosed `$(` and any other `$x` are kept as written.
 */
export function expand(input: string, mapping: (name: string) => string): string {
  let out = '';
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== '$' || cursor + 1 >= input.length) continue;
    out += input.slice(checkpoint, cursor);
    const rest = input.slice(cursor + 1);
    let advance = 1;
    if (rest[0] === '$') {
      out += '$';
    } else if (rest[0] === '(') {
      const close = rest.indexOf(')', 1);
      if (close > 0) {
        out += mapping(rest.slice(1, close));
        advance = close + 1;
      } else {
        out += '$(';
      }
    } else {
      out += `$${rest[0]}`;
    }
    cursor += advance;
    checkpoint = cursor + 1;
  }
  return out + input.slice(checkpoint);
}

/** ExpandContainerVolumeMounts: every referenced variable must exist and be non-empty. */
export function expandSubPathExpr(expr: string, env: Map<string, string>): string {
  const missing = new Set<string>();
  const expanded = expand(expr, (key) => {
    const value = env.get(key);
    if (value === undefined || value === '') missing.add(key);
    return value ?? '';
  });
  if (missing.size > 0) throw new Error(`missing value for ${[...missing].sort().join(', ')}`);
  return expanded;
}

type Fetch<T> = (namespace: string, name: string) => Promise<T>;

/** kubelet's makeEnvironmentVariables, for the names and values only. */
export async function containerEnv(
  pod: V1Pod,
  container: V1Container,
  host: VolumeHost,
): Promise<Map<string, string>> {
  const ns = pod.metadata?.namespace ?? '';
  const standalone = host.getKubeConfig() === undefined;
  // One fetch per object and kind for the whole container.
  const cached = <T>(kind: 'configMap' | 'secret', fetch: Fetch<T>) => {
    const cache = new Map<string, T>();
    return async (name: string, optional: boolean): Promise<T | undefined> => {
      const hit = cache.get(name);
      if (hit !== undefined) return hit;
      if (standalone) throw new Error(`couldn't get ${kind} ${ns}/${name}, no kubeClient defined`);
      try {
        const obj = await fetch(ns, name);
        cache.set(name, obj);
        return obj;
      } catch (err) {
        if (isNotFound(err) && optional) return undefined;
        throw err;
      }
    };
  };
  // The host's getters are asked only when a container names an object.
  const configMap = cached('configMap', (namespace, name) => host.getConfigMapFunc()(namespace, name));
  const secret = cached('secret', (namespace, name) => host.getSecretFunc()(namespace, name));
  const decode = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
  /** The key an env var names (configMapKeyRef, secretKeyRef); undefined when an optional one is missing. */
  const keyValue = async (
    kind: 'ConfigMap' | 'Secret',
    get: (name: string, optional: boolean) => Promise<{ data?: Record<string, string> } | undefined>,
    ref: { name?: string; key: string; optional?: boolean },
  ): Promise<string | undefined> => {
    const optional = ref.optional === true;
    const obj = await get(ref.name ?? '', optional);
    if (!obj) return undefined;
    const value = ownValue(obj.data, ref.key);
    if (value === undefined && !optional)
      throw new Error(`couldn't find key ${ref.key} in ${kind} ${ns}/${ref.name}`);
    return value;
  };

  const env = new Map<string, string>();
  // envFrom first; env then overrides it.
  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    if (from.configMapRef) {
      const cm = await configMap(from.configMapRef.name ?? '', from.configMapRef.optional === true);
      for (const [k, v] of Object.entries(cm?.data ?? {})) env.set(prefix + k, v);
    } else if (from.secretRef) {
      const s = await secret(from.secretRef.name ?? '', from.secretRef.optional === true);
      for (const [k, v] of Object.entries(s?.data ?? {})) env.set(prefix + k, decode(v));
    }
  }
  // Unknown references stay as written (expansion.MappingFuncFor).
  const mapping = (name: string) => env.get(name) ?? `$(${name})`;
  for (const e of container.env ?? []) {
    let value = e.value ?? '';
    if (value !== '') {
      value = expand(value, mapping);
    } else if (e.valueFrom?.fieldRef) {
      value = podFieldSelectorRuntimeValue(pod, e.valueFrom.fieldRef.fieldPath, host.getHostIP());
    } else if (e.valueFrom?.resourceFieldRef) {
      const ref = e.valueFrom.resourceFieldRef;
      value = extractResourceValue(
        ref,
        pod,
        ref.containerName || (container.name ?? ''),
        host.getNodeAllocatable(),
      );
    } else if (e.valueFrom?.configMapKeyRef) {
      const text = await keyValue('ConfigMap', configMap, e.valueFrom.configMapKeyRef);
      if (text === undefined) continue;
      value = text;
    } else if (e.valueFrom?.secretKeyRef) {
      const encoded = await keyValue('Secret', secret, e.valueFrom.secretKeyRef);
      if (encoded === undefined) continue;
      value = decode(encoded);
    }
    env.set(e.name, value);
  }
  return env;
}
