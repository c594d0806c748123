// kubernetes.io/secret: a secret's keys as files on a tmpfs wrapper, so the
// bytes never touch persistent disk.

import type { VolumePlugin } from '../volumehost/volume.ts';
import { secretFiles } from './payload.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const secretPluginName = 'kubernetes.io/secret';

export function secretPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: secretPluginName,
    medium: 'Memory',
    canSupport: (spec) => Boolean(spec.volume?.secret),
    async payload(host, spec, pod) {
      const source = spec.volume?.secret ?? {};
      return secretFiles(
        host,
        pod.metadata?.namespace ?? 'default',
        { name: source.secretName ?? '', items: source.items, optional: source.optional },
        source.defaultMode,
      );
    },
    constructVolumeSpec: (name) => ({ volume: { name, secret: { secretName: name } }, readOnly: false }),
  });
}
