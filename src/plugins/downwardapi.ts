// kubernetes.io/downward-api: pod fields and resources as files on a tmpfs
// wrapper. RequiresRemount is true so label/annotation changes are rewritten.
import type { V1Pod } from '@kubernetes/client-node';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { type Mounter, type Spec, VolumeError, type VolumePlugin } from './types.ts';
import { collectDownwardAPIData } from './util/fieldpath.ts';
import { setUpWrapped, tearDownWrapped } from './wrapped-volume.ts';

export const downwardAPIPluginName = 'kubernetes.io/downward-api';
const escaped = escapeQualifiedName(downwardAPIPluginName);

function newMounter(host: VolumeHost, spec: Spec, pod: V1Pod): Mounter {
  const name = spec.volume?.name ?? '';
  const source = spec.volume?.downwardAPI ?? {};
  const path = host.getPodVolumeDir(pod.metadata?.uid ?? '', escaped, name);
  const mounter: Mounter = {
    getPath: () => path,
    getAttributes: () => ({ readOnly: true, managed: true, selinuxRelabel: true }),
    setUp: (args) => mounter.setUpAt(path, args),
    async setUpAt(dir, args) {
      const { payload, errors } = collectDownwardAPIData(
        source.items ?? [],
        pod,
        host.getNodeAllocatable(),
        source.defaultMode ?? 0o644,
      );
      if (errors.length > 0) throw new VolumeError('DownwardAPIFieldError', errors.join(', '));
      await setUpWrapped({ host, pod, volumeName: name, medium: 'Memory', dir, args, payload });
    },
  };
  return mounter;
}

export function downwardAPIPlugin(): VolumePlugin {
  let host: VolumeHost;
  return {
    name: downwardAPIPluginName,
    init(h) {
      host = h;
    },
    getVolumeName: (spec) => spec.volume?.name ?? '',
    canSupport: (spec) => Boolean(spec.volume?.downwardAPI),
    requiresRemount: () => true,
    supportsMountOption: () => false,
    newMounter: (spec, pod) => newMounter(host, spec, pod),
    newUnmounter: (name, podUID) => {
      const path = host.getPodVolumeDir(podUID, escaped, name);
      return {
        getPath: () => path,
        tearDown: () => tearDownWrapped(host, name, 'Memory', podUID, path),
        tearDownAt: (dir) => tearDownWrapped(host, name, 'Memory', podUID, dir),
      };
    },
    constructVolumeSpec: (name) => ({ volume: { name, downwardAPI: { items: [] } }, readOnly: false }),
  };
}
