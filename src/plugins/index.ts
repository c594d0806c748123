// The in-tree plugin set podvol ships (kubelet's ProbeVolumePlugins).

import type { VolumePlugin } from '../volumehost/volume.ts';
import { configMapPlugin } from './configmap.ts';
import { downwardAPIPlugin } from './downwardapi.ts';
import { emptyDirPlugin } from './emptydir.ts';
import { hostPathPlugin } from './hostpath.ts';
import { imagePlugin } from './image.ts';
import { localVolumePlugin } from './local.ts';
import { projectedPlugin } from './projected.ts';
import { secretPlugin } from './secret.ts';

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
