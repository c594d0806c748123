// kubernetes.io/downward-api: pod fields and resources as files on a tmpfs
// wrapper. RequiresRemount is true so label/annotation changes are rewritten.
import { VolumeError, type VolumePlugin } from '../volumehost/volume.ts';
import { collectDownwardAPIData } from './util/fieldpath.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const downwardAPIPluginName = 'kubernetes.io/downward-api';

export function downwardAPIPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: downwardAPIPluginName,
    medium: 'Memory',
    canSupport: (spec) => Boolean(spec.volume?.downwardAPI),
    async payload(host, spec, pod) {
      const source = spec.volume?.downwardAPI ?? {};
      const { payload, errors } = collectDownwardAPIData(
        source.items ?? [],
        pod,
        host.getNodeAllocatable(),
        source.defaultMode ?? 0o644,
        host.getHostIP(),
      );
      if (errors.length > 0) throw new VolumeError('DownwardAPIFieldError', errors.join(', '));
      return payload;
    },
    constructVolumeSpec: (name) => ({ volume: { name, downwardAPI: { items: [] } }, readOnly: false }),
  });
}
