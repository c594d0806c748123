// The pod's resources as kubelet sees them when it sizes volumes:
//   k8s.io/component-helpers/resource  PodLimits, AggregateContainerLimits (sidecars),
//                                      IsPodLevelResourcesSet
//   pkg/apis/core/v1/helper/qos        GetPodQOS / ComputePodQOS
//   pkg/kubelet/cm/helpers_linux.go    ResourceConfigForPod (its Memory only)
//   pkg/apis/core/v1/helper            the hugepages-<size> / HugePages-<size> names
// PodLevelResources is on (default since Kubernetes 1.34), so spec.resources counts.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { parseQuantity, type Quantity, quantityValue } from './quantity.ts';

/** A resource list with exact values (Quantity nanos), keyed by resource name. */
export type Amounts = Map<string, bigint>;

export const hugePagesResourcePrefix = 'hugepages-';
export const hugePagesMediumPrefix = 'HugePages-';

/** The quantities of a v1 ResourceList; an unparseable one counts as absent (validation reports it). */
export function amountsOf(list: Record<string, unknown> | undefined | null): Amounts {
  const out: Amounts = new Map();
  if (!list || typeof list !== 'object') return out;
  for (const [name, value] of Object.entries(list)) {
    if (value === undefined || value === null) continue;
    try {
      out.set(name, parseQuantity(String(value)).nanos);
    } catch {
      // Unparseable: left out, as a pod carrying it never passes validation.
    }
  }
  return out;
}

function add(to: Amounts, from: Amounts): void {
  for (const [k, v] of from) to.set(k, (to.get(k) ?? 0n) + v);
}

function maxInto(to: Amounts, from: Amounts): void {
  for (const [k, v] of from) {
    const current = to.get(k);
    if (current === undefined || v > current) to.set(k, v);
  }
}

const isSidecar = (c: V1Container) => c.restartPolicy === 'Always';

/** IsSupportedPodLevelResource: cpu, memory and hugepages-<size>. */
export function isSupportedPodLevelResource(name: string): boolean {
  return name === 'cpu' || name === 'memory' || name.startsWith(hugePagesResourcePrefix);
}

/** IsPodLevelLimitsSet: spec.resources.limits names at least one supported resource. */
export function isPodLevelLimitsSet(pod: V1Pod): boolean {
  return Object.keys(pod.spec?.resources?.limits ?? {}).some(isSupportedPodLevelResource);
}

/** IsPodLevelResourcesSet: IsPodLevelRequestsSet or IsPodLevelLimitsSet. */
export function isPodLevelResourcesSet(pod: V1Pod): boolean {
  return (
    Object.keys(pod.spec?.resources?.requests ?? {}).some(isSupportedPodLevelResource) ||
    isPodLevelLimitsSet(pod)
  );
}

export type ContainerType = 'Containers' | 'InitContainers';

/**
 * AggregateContainerLimits: app containers and sidecars (restartable init
 * containers) add up; each plain init container needs its own limit plus the
 * sidecars started before it; the pod needs the larger of the two. `each` sees
 * every list as kubelet's ContainerFn does (an init container's includes the
 * sidecars before it).
 */
export function aggregateContainerLimits(
  pod: V1Pod,
  each?: (limits: Amounts, type: ContainerType) => void,
): Amounts {
  const limits: Amounts = new Map();
  for (const c of pod.spec?.containers ?? []) {
    const own = amountsOf(c.resources?.limits);
    each?.(own, 'Containers');
    add(limits, own);
  }
  const sidecars: Amounts = new Map();
  const initPeak: Amounts = new Map();
  for (const c of pod.spec?.initContainers ?? []) {
    const own = amountsOf(c.resources?.limits);
    let effective: Amounts;
    if (isSidecar(c)) {
      add(limits, own);
      add(sidecars, own);
      effective = new Map(sidecars);
    } else {
      effective = new Map(own);
      add(effective, sidecars);
    }
    each?.(effective, 'InitContainers');
    maxInto(initPeak, effective);
  }
  maxInto(limits, initPeak);
  return limits;
}

/** PodLimits: aggregated container limits, pod-level limits instead where set, overhead on non-zero limits. */
export function podLimits(pod: V1Pod, each?: (limits: Amounts, type: ContainerType) => void): Amounts {
  const limits = aggregateContainerLimits(pod, each);
  if (isPodLevelResourcesSet(pod)) {
    for (const [name, v] of amountsOf(pod.spec?.resources?.limits))
      if (isSupportedPodLevelResource(name)) limits.set(name, v);
  }
  for (const [name, v] of amountsOf(pod.spec?.overhead)) {
    const current = limits.get(name);
    if (current !== undefined && current !== 0n) limits.set(name, current + v);
  }
  return limits;
}

export type QOSClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

/** resourceQOS: one set of requirements, judged on cpu and memory. */
function resourceQOS(requests: Amounts, limits: Amounts, empty: boolean): QOSClass {
  if (empty) return 'BestEffort';
  let qos: QOSClass | undefined;
  for (const name of ['cpu', 'memory']) {
    const req = requests.get(name) ?? 0n;
    const lim = limits.get(name) ?? 0n;
    if (req !== lim) return 'Burstable';
    const bestEffort = req === 0n;
    if (qos === undefined) qos = bestEffort ? 'BestEffort' : 'Guaranteed';
    else if (bestEffort !== (qos === 'BestEffort')) return 'Burstable';
  }
  return qos ?? 'BestEffort';
}

const isEmptyList = (l: Record<string, unknown> | undefined | null) => !l || Object.keys(l).length === 0;

/** GetPodQOS: status.qosClass when the API server set it, else computed as ComputePodQOS does. */
export function podQOS(pod: V1Pod): QOSClass {
  const recorded = pod.status?.qosClass;
  if (recorded === 'Guaranteed' || recorded === 'Burstable' || recorded === 'BestEffort') return recorded;
  const podLevel = pod.spec?.resources;
  if (podLevel) {
    return resourceQOS(
      amountsOf(podLevel.requests),
      amountsOf(podLevel.limits),
      isEmptyList(podLevel.requests) && isEmptyList(podLevel.limits),
    );
  }
  let qos: QOSClass | undefined;
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    const r = c.resources;
    const q = resourceQOS(
      amountsOf(r?.requests),
      amountsOf(r?.limits),
      isEmptyList(r?.requests) && isEmptyList(r?.limits),
    );
    if (q === 'Burstable') return q;
    if (qos === undefined) qos = q;
    else if (qos !== q) return 'Burstable';
  }
  return qos ?? 'BestEffort';
}

/**
 * The memory limit of the pod's cgroup in bytes as ResourceConfigForPod sets it,
 * or undefined when it sets none: Guaranteed pods always have one; Burstable
 * pods only when every container's effective limit (or the pod-level limit)
 * names memory; BestEffort pods never.
 */
export function podCgroupMemoryLimit(pod: V1Pod): bigint | undefined {
  let declared = true;
  const limits = podLimits(pod, (l) => {
    if ((l.get('memory') ?? 0n) === 0n) declared = false;
  });
  if (isPodLevelResourcesSet(pod) && (amountsOf(pod.spec?.resources?.limits).get('memory') ?? 0n) !== 0n) {
    declared = true;
  }
  const bytes = quantityValue({ nanos: limits.get('memory') ?? 0n, format: 'BinarySI' });
  switch (podQOS(pod)) {
    case 'Guaranteed':
      return bytes;
    case 'Burstable':
      return declared ? bytes : undefined;
    default:
      return undefined;
  }
}

/** HugePageSizeFromResourceName. */
export function hugePageSizeFromResourceName(name: string): Quantity {
  if (!name.startsWith(hugePagesResourcePrefix))
    throw new Error(`resource name: ${name} is not valid hugepage name`);
  return parseQuantity(name.slice(hugePagesResourcePrefix.length));
}

export const isHugePageMedium = (medium: string) =>
  medium === 'HugePages' || medium.startsWith(hugePagesMediumPrefix);

/** HugePageSizeFromMedium. */
export function hugePageSizeFromMedium(medium: string): Quantity {
  if (!isHugePageMedium(medium)) throw new Error(`medium: ${medium} is not a hugepage medium`);
  if (medium === 'HugePages') throw new Error(`medium: ${medium} doesn't have size information`);
  return parseQuantity(medium.slice(hugePagesMediumPrefix.length));
}

/**
 * The hugepages requests kubelet's getPageSizeMountOption looks at: the pod-level
 * requests when pod-level resources are set, then every app and init container's.
 */
export function hugePageRequestLists(pod: V1Pod): Record<string, unknown>[] {
  const lists: Record<string, unknown>[] = [];
  if (isPodLevelResourcesSet(pod)) lists.push(pod.spec?.resources?.requests ?? {});
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])])
    lists.push(c.resources?.requests ?? {});
  return lists;
}
