// kubernetes.io/downward-api: pod fields and resources as files on a tmpfs
// wrapper. RequiresRemount is true so label/annotation changes are rewritten.
import type { V1Pod } from '@kubernetes/client-node';
import type { VolumeHost } from '../volumehost/types.ts';
import { VolumeError, type VolumePlugin } from '../volumehost/volume.ts';
import { collectDownwardAPIData } from './util/fieldpath.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const downwardAPIPluginName = 'kubernetes.io/downward-api';

/** status.hostIP "where known": the pod's own, else this node's. */
export function withHostIP(pod: V1Pod, host: VolumeHost): V1Pod {
  if (pod.status?.hostIP) return pod;
  const hostIP = host.getHostIP();
  return hostIP ? { ...pod, status: { ...pod.status, hostIP } } : pod;
}

export function downwardAPIPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: downwardAPIPluginName,
    medium: 'Memory',
    canSupport: (spec) => Boolean(spec.volume?.downwardAPI),
    async payload(host, spec, pod) {
      const source = spec.volume?.downwardAPI ?? {};
      const { payload, errors } = collectDownwardAPIData(
        source.items ?? [],
        withHostIP(pod, host),
        host.getNodeAllocatable(),
        source.defaultMode ?? 0o644,
      );
      if (errors.length > 0) throw new VolumeError('DownwardAPIFieldError', errors.join(', '));
      return payload;
    },
    constructVolumeSpec: (name) => ({ volume: { name, downwardAPI: { items: [] } }, readOnly: false }),
  });
}
