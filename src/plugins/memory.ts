// Whether tmpfs takes `noswap` (Linux >= 6.4). The pod's memory limit is
// util/resources.ts's podCgroupMemoryLimit (kubelet's ResourceConfigForPod).
import { release } from 'node:os';

export function kernelSupportsNoswap(kernelRelease: string): boolean {
  const [major, minor] = kernelRelease.split('.').map((x) => Number.parseInt(x, 10));
  return major > 6 || (major === 6 && minor >= 4);
}

export async function tmpfsNoswapSupported(): Promise<boolean> {
  return kernelSupportsNoswap(release());
}
