// The in-tree plugin set podvol ships (kubelet's ProbeVolumePlugins).
import { downwardAPIPlugin } from './downwardapi.ts';
import { emptyDirPlugin } from './emptydir.ts';
import { hostPathPlugin } from './hostpath.ts';
import type { VolumePlugin } from './types.ts';

export function probeVolumePlugins(): VolumePlugin[] {
  return [emptyDirPlugin(), hostPathPlugin(), downwardAPIPlugin()];
}
