// kubernetes.io/configmap: a configMap's keys as files, on a disk-backed
// wrapper as kubelet does. Data is fetched before anything is touched, so a
// configMap deleted under a non-optional volume leaves the last content.

import type { VolumePlugin } from '../volumehost/volume.ts';
import { configMapFiles } from './payload.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const configMapPluginName = 'kubernetes.io/configmap';

export function configMapPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: configMapPluginName,
    medium: '',
    canSupport: (spec) => Boolean(spec.volume?.configMap),
    async payload(host, spec, pod) {
      const source = spec.volume?.configMap ?? {};
      return configMapFiles(
        host,
        pod.metadata?.namespace ?? 'default',
        { name: source.name ?? '', items: source.items, optional: source.optional },
        source.defaultMode,
      );
    },
    constructVolumeSpec: (name) => ({ volume: { name, configMap: { name } }, readOnly: false }),
  });
}
