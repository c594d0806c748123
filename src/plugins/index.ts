// The in-tree plugin set podvol ships (kubelet's ProbeVolumePlugins).
import { configMapPlugin } from './configmap.ts';
import { downwardAPIPlugin } from './downwardapi.ts';
import { emptyDirPlugin } from './emptydir.ts';
import { hostPathPlugin } from './hostpath.ts';
import { imagePlugin } from './image.ts';
import { localVolumePlugin } from './local.ts';
import { projectedPlugin } from './projected.ts';
import { secretPlugin } from './secret.ts';
import type { VolumePlugin } from './types.ts';

export function probeVolumePlugins(): VolumePlugin[] {
  return [
    emptyDirPlugin(),
    hostPathPlugin(),
    downwardAPIPlugin(),
    configMapPlugin(),
    secretPlugin(),
    projectedPlugin(),
    imagePlugin(),
    localVolumePlugin(),
  ];
}
