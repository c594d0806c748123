// kubernetes.io/configmap: a configMap's keys as files, on a disk-backed
// wrapper as kubelet does. Data is fetched before anything is touched, so a
// configMap deleted under a non-optional volume leaves the last content.
import type { V1Pod } from '@kubernetes/client-node';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { configMapPayload, fetchError, fetchOptional } from './payload.ts';
import type { Mounter, Spec, VolumePlugin } from './types.ts';
import { setUpWrapped, tearDownWrapped } from './wrapped-volume.ts';

export const configMapPluginName = 'kubernetes.io/configmap';
const escaped = escapeQualifiedName(configMapPluginName);

function newMounter(host: VolumeHost, spec: Spec, pod: V1Pod): Mounter {
  const name = spec.volume?.name ?? '';
  const source = spec.volume?.configMap ?? {};
  const path = host.getPodVolumeDir(pod.metadata?.uid ?? '', escaped, name);
  const mounter: Mounter = {
    getPath: () => path,
    getAttributes: () => ({ readOnly: true, managed: true, selinuxRelabel: true }),
    setUp: (args) => mounter.setUpAt(path, args),
    async setUpAt(dir, args) {
      const optional = source.optional === true;
      const ns = pod.metadata?.namespace ?? 'default';
      const cm = await fetchOptional(
        () => host.getConfigMapFunc()(ns, source.name ?? ''),
        { metadata: { name: source.name, namespace: ns } },
        optional,
      ).catch((err) => {
        throw fetchError('ConfigMap', err);
      });
      const payload = configMapPayload(source.items, cm, source.defaultMode, optional);
      await setUpWrapped({ host, pod, volumeName: name, medium: '', dir, args, payload });
    },
  };
  return mounter;
}

export function configMapPlugin(): VolumePlugin {
  let host: VolumeHost;
  return {
    name: configMapPluginName,
    init(h) {
      host = h;
    },
    getVolumeName: (spec) => spec.volume?.name ?? '',
    canSupport: (spec) => Boolean(spec.volume?.configMap),
    requiresRemount: () => true,
    supportsMountOption: () => false,
    newMounter: (spec, pod) => newMounter(host, spec, pod),
    newUnmounter: (name, podUID) => {
      const path = host.getPodVolumeDir(podUID, escaped, name);
      return {
        getPath: () => path,
        tearDown: () => tearDownWrapped(host, name, '', podUID, path),
        tearDownAt: (dir) => tearDownWrapped(host, name, '', podUID, dir),
      };
    },
    constructVolumeSpec: (name) => ({ volume: { name, configMap: { name } }, readOnly: false }),
  };
}
