// Downward API for volumes, as kubelet computes it:
//   k/k pkg/fieldpath/fieldpath.go            (ExtractFieldPathAsString, FormatMap)
//   k/k pkg/api/v1/resource/helpers.go        (ExtractResourceValueByContainerNameAndNodeAllocatable)
//   k/k pkg/kubelet/kubelet_resources.go      (defaultPodLimitsForDownwardAPI: pod-level limits first)
//   k/k pkg/volume/downwardapi/downwardapi.go (CollectData)
//   k/k pkg/kubelet/kubelet_pods.go           (podFieldSelectorRuntimeValue: env vars)
// The one home of field-path resolution: volume items go through
// ExtractFieldPathAsString, which knows the metadata.* paths; beyond kubelet,
// spec.nodeName, spec.serviceAccountName and status.hostIP (env-var-only paths
// in kubelet) are rendered too, to the values an env var gets.
// status.podIP and the other runtime values stay volume errors, as podvol
// cannot rewrite a file when they change; env vars get them
// (podFieldSelectorRuntimeValue below).
import type {
  V1Container,
  V1DownwardAPIVolumeFile,
  V1Pod,
  V1ResourceFieldSelector,
} from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { ownValue } from '../../own.ts';
import { cleanPath, type FileProjection } from './atomic-writer.ts';
import { validateQualifiedName } from './names.ts';
import {
  isZeroQuantity,
  parseQuantity,
  type Quantity,
  quantityMilliValue,
  quantityValue,
} from './quantity.ts';
import { isPodLevelLimitsSet, isSupportedPodLevelResource } from './resources.ts';

// Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and ASCII space.
const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** Go's strconv.Quote (what %q prints for a string). */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    // A for..of over a string yields whole code points: never empty.
    let cp = ch.codePointAt(0) ?? 0xfffd;
    // A lone surrogate cannot come out of Go's JSON decoder; it becomes U+FFFD.
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    const c = String.fromCodePoint(cp);
    if (c === '"' || c === '\\') out += `\\${c}`;
    else if (printable.test(c)) out += c;
    else if (cp === 0x07) out += '\\a';
    else if (cp === 0x08) out += '\\b';
    else if (cp === 0x0c) out += '\\f';
    else if (cp === 0x0a) out += '\\n';
    else if (cp === 0x0d) out += '\\r';
    else if (cp === 0x09) out += '\\t';
    else if (cp === 0x0b) out += '\\v';
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return `${out}"`;
}

// Go sorts strings by their UTF-8 bytes; JS's default sort uses UTF-16 units.
function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** kubelet's FormatMap: `key="value"` lines sorted by key, %q-quoted values, no trailing newline. */
export function formatMap(m: Record<string, string> | undefined): string {
  if (!m) return '';
  return Object.entries(m)
    .sort(([a], [b]) => compareBytes(a, b))
    .map(([k, v]) => `${k}=${goQuote(v)}`)
    .join('\n');
}

/** SplitMaybeSubscriptedPath: `metadata.labels['k']` → ['metadata.labels', 'k']. */
export function splitMaybeSubscriptedPath(fieldPath: string): [path: string, subscript: string] | undefined {
  if (!fieldPath.endsWith("']")) return undefined;
  const s = fieldPath.slice(0, -2);
  const at = s.indexOf("['");
  if (at <= 0) return undefined;
  return [s.slice(0, at), s.slice(at + 2)];
}

/**
 * status.hostIPs as the downward API renders them: the pod's status.hostIPs,
 * else its status.hostIP, else this node's address. kubelet reads the node's
 * addresses (getHostIPsAnyWay), which are what it writes into the status; a
 * pod podvol runs has a status written by a kubelet, or (a static pod) none,
 * and then this node's address is the one it has.
 */
export function hostIPsOf(pod: V1Pod, nodeHostIP: string | undefined): string[] {
  const ips = (pod.status?.hostIPs ?? []).map((h) => h.ip).filter(Boolean);
  if (ips.length > 0) return ips;
  const one = pod.status?.hostIP || nodeHostIP;
  return one ? [one] : [];
}

function firstHostIP(pod: V1Pod, nodeHostIP: string | undefined): string {
  const [first] = hostIPsOf(pod, nodeHostIP);
  if (first === undefined) throw new Error('status.hostIP is not known on this node');
  return first;
}

/**
 * kubelet's podFieldSelectorRuntimeValue, for env vars: the runtime values
 * (status.hostIPs, status.podIP, status.podIPs), then every path a volume
 * file knows, resolved by the same code so env and volume agree.
 */
export function podFieldSelectorRuntimeValue(
  pod: V1Pod,
  fieldPath: string,
  nodeHostIP: string | undefined,
): string {
  const podIPs = (pod.status?.podIPs ?? []).map((p) => p.ip).filter(Boolean);
  switch (fieldPath) {
    case 'status.hostIPs': {
      const ips = hostIPsOf(pod, nodeHostIP);
      if (ips.length === 0) throw new Error('status.hostIP is not known on this node');
      return ips.join(',');
    }
    case 'status.podIP':
      return podIPs[0] ?? pod.status?.podIP ?? '';
    case 'status.podIPs':
      return podIPs.join(',');
  }
  return extractFieldPathAsString(pod, fieldPath, nodeHostIP);
}

/**
 * ExtractFieldPathAsString for a pod, with kubelet's error messages.
 * `nodeHostIP`: this node's address, for status.hostIP (hostIPsOf).
 */
export function extractFieldPathAsString(pod: V1Pod, fieldPath: string, nodeHostIP?: string): string {
  const meta = pod.metadata ?? {};
  const split = splitMaybeSubscriptedPath(fieldPath);
  if (split) {
    const [path, subscript] = split;
    switch (path) {
      case 'metadata.annotations': {
        // Annotation keys are validated case-insensitively, label keys are not.
        const errs = validateQualifiedName(subscript.toLowerCase());
        if (errs.length) throw new Error(`invalid key subscript in ${fieldPath}: ${errs.join(';')}`);
        return ownValue(meta.annotations, subscript) ?? '';
      }
      case 'metadata.labels': {
        const errs = validateQualifiedName(subscript);
        if (errs.length) throw new Error(`invalid key subscript in ${fieldPath}: ${errs.join(';')}`);
        return ownValue(meta.labels, subscript) ?? '';
      }
      default:
        throw new Error(`fieldPath ${goQuote(fieldPath)} does not support subscript`);
    }
  }
  switch (fieldPath) {
    case 'metadata.annotations':
      return formatMap(meta.annotations);
    case 'metadata.labels':
      return formatMap(meta.labels);
    case 'metadata.name':
      return meta.name ?? '';
    case 'metadata.namespace':
      return meta.namespace ?? '';
    case 'metadata.uid':
      return meta.uid ?? '';
    // Beyond kubelet, whose API validation allows only metadata.* in volume
    // files: the node-side fields podvol knows (issue 3), rendered as kubelet
    // renders them for environment variables.
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP':
      return firstHostIP(pod, nodeHostIP);
  }
  throw new Error(`unsupported fieldPath: ${fieldPath}`);
}

function findContainerInPod(pod: V1Pod, containerName: string): V1Container {
  const found =
    pod.spec?.containers?.find((c) => c.name === containerName) ??
    pod.spec?.initContainers?.find((c) => c.name === containerName);
  if (!found) throw new Error(`container ${containerName} not found`);
  return found;
}

type ResourceList = Record<string, string | number>;

function parseResource(value: string | number, what: string): Quantity {
  try {
    // YAML may hand numbers (`cpu: 1`) where the API has quantity strings.
    return parseQuantity(String(value));
  } catch (err) {
    throw new Error(`${what}: ${errorMessage(err)}`, { cause: err });
  }
}

function lookup(list: ResourceList | undefined, name: string, what: string): Quantity {
  const v = list?.[name];
  return v === undefined ? { nanos: 0n, format: 'DecimalSI' } : parseResource(v, `${what} ${name}`);
}

// math.Ceil(float64(a) / float64(b)) formatted as an int64, exactly as Go does it
// (float64 division included, so huge values round the way kubelet's do).
function ceilDiv(a: bigint, b: bigint): string {
  return BigInt(Math.ceil(Number(a) / Number(b))).toString();
}

/** The limits the downward API reports for a container that sets none (MergeContainerResourceLimits). */
const DEFAULTED_LIMITS = ['cpu', 'memory', 'ephemeral-storage'] as const;

/**
 * What an unset (or zero) container limit defaults to, as kubelet's
 * defaultPodLimitsForDownwardAPI (PodLevelResources, on by default since
 * 1.34): node allocatable, except that when the pod sets pod-level limits
 * (IsPodLevelLimitsSet) each non-zero pod-level limit of a resource that pod
 * level supports (cpu, memory; not ephemeral-storage) replaces it, and only
 * where node allocatable names that resource, as kubelet's loop does.
 */
export function downwardAPILimitDefaults(
  pod: V1Pod,
  nodeAllocatable: Record<string, string>,
): Record<string, string> {
  if (!isPodLevelLimitsSet(pod)) return nodeAllocatable;
  const podLimits: ResourceList = pod.spec?.resources?.limits ?? {};
  const out = { ...nodeAllocatable };
  for (const name of DEFAULTED_LIMITS) {
    if (!isSupportedPodLevelResource(name)) continue;
    const v = podLimits[name];
    if (v === undefined || isZeroQuantity(parseResource(v, `pod limits.${name}`))) continue;
    if (Object.hasOwn(out, name)) out[name] = String(v);
  }
  return out;
}

/**
 * ExtractResourceValueByContainerNameAndNodeAllocatable: the value a
 * resourceFieldRef renders to. Unset (or zero) cpu/memory/ephemeral-storage
 * limits fall back to the pod-level limit, then node allocatable
 * (downwardAPILimitDefaults); the result is rounded up to whole divisor units
 * (cpu compared in millicores, the rest in units).
 */
export function extractResourceValue(
  ref: V1ResourceFieldSelector,
  pod: V1Pod,
  containerName: string,
  nodeAllocatable: Record<string, string>,
): string {
  const container = findContainerInPod(pod, containerName);
  const what = `container ${containerName}`;
  const requests: ResourceList | undefined = container.resources?.requests;
  const limits: ResourceList = { ...container.resources?.limits };
  const defaults = downwardAPILimitDefaults(pod, nodeAllocatable);
  // Hugepages are never overcommitted, so only these three are defaulted.
  for (const name of DEFAULTED_LIMITS) {
    const current = limits[name];
    if (current === undefined || isZeroQuantity(parseResource(current, `${what} limits.${name}`))) {
      const cap = defaults[name];
      if (cap !== undefined) limits[name] = cap;
    }
  }

  let divisor = ref.divisor === undefined ? undefined : parseResource(ref.divisor, 'divisor');
  if (!divisor || isZeroQuantity(divisor)) divisor = parseQuantity('1');

  const milli = (q: Quantity) => ceilDiv(quantityMilliValue(q), quantityMilliValue(divisor));
  const units = (q: Quantity) => ceilDiv(quantityValue(q), quantityValue(divisor));
  // ExtractContainerResourceValue: cpu in millicores; memory, ephemeral-storage and hugepages-<size> in units.
  for (const kind of ['limits', 'requests'] as const) {
    const prefix = `${kind}.`;
    if (!ref.resource.startsWith(prefix)) continue;
    const name = ref.resource.slice(prefix.length);
    const list = kind === 'limits' ? limits : requests;
    if (name === 'cpu') return milli(lookup(list, name, `${what} ${kind}`));
    if (name === 'memory' || name === 'ephemeral-storage' || name.startsWith('hugepages-'))
      return units(lookup(list, name, `${what} ${kind}`));
  }
  throw new Error(`unsupported container resource : ${ref.resource}`);
}

/**
 * CollectData: one file per item, keyed by the cleaned path. A failing item
 * still gets an (empty) entry and its error is collected, like kubelet, which
 * then refuses the whole payload when any error occurred.
 */
export function collectDownwardAPIData(
  items: V1DownwardAPIVolumeFile[] | undefined,
  pod: V1Pod,
  nodeAllocatable: Record<string, string>,
  defaultMode: number,
  nodeHostIP: string | undefined,
): { payload: Map<string, FileProjection>; errors: string[] } {
  const payload = new Map<string, FileProjection>();
  const errors: string[] = [];
  for (const item of items ?? []) {
    const projection: FileProjection = { data: '', mode: item.mode ?? defaultMode };
    try {
      if (item.fieldRef) {
        projection.data = extractFieldPathAsString(pod, item.fieldRef.fieldPath, nodeHostIP);
      } else if (item.resourceFieldRef) {
        const ref = item.resourceFieldRef;
        projection.data = extractResourceValue(ref, pod, ref.containerName ?? '', nodeAllocatable);
      }
    } catch (err) {
      errors.push(errorMessage(err));
    }
    payload.set(cleanPath(item.path), projection);
  }
  return { payload, errors };
}
