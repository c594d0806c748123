// Memory facts emptyDir needs: the pod's memory limit as kubelet's PodLimits
// computes it, and whether tmpfs takes `noswap` (Linux >= 6.4).
import { release } from 'node:os';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { quantityToBigInt } from './quantity-bytes.ts';

const memLimit = (c: V1Container): bigint => {
  const q = c.resources?.limits?.memory;
  return q === undefined ? 0n : quantityToBigInt(String(q), `memory limit of container ${c.name}`);
};

/**
 * The pod's memory limit, 0 when it has none. Sum of the app containers' (and restartable init "sidecar" containers') limits,
 * at least the largest plain init container's, plus pod overhead.
 */
export function podMemoryLimit(pod: V1Pod): bigint {
  // kubelet's ResourceConfigForPod: one container without a memory limit means
  // the pod has none, and emptyDir falls back to node allocatable.
  const all = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  if (all.length === 0 || all.some((c) => memLimit(c) === 0n)) return 0n;
  const sidecars = (pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
  let sum = 0n;
  for (const c of [...(pod.spec?.containers ?? []), ...sidecars]) sum += memLimit(c);
  for (const c of pod.spec?.initContainers ?? []) {
    if (c.restartPolicy === 'Always') continue;
    const l = memLimit(c);
    if (l > sum) sum = l;
  }
  const overhead = pod.spec?.overhead?.memory;
  if (sum > 0n && overhead !== undefined) sum += quantityToBigInt(String(overhead), 'pod overhead memory');
  return sum;
}

export function kernelSupportsNoswap(kernelRelease: string): boolean {
  const [major, minor] = kernelRelease.split('.').map((x) => Number.parseInt(x, 10));
  return major > 6 || (major === 6 && minor >= 4);
}

export async function tmpfsNoswapSupported(): Promise<boolean> {
  return kernelSupportsNoswap(release());
}
