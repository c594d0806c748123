// kubernetes.io/configmap: a configMap's keys as files, on a disk-backed
// wrapper as kubelet does. Data is fetched before anything is touched, so a
// configMap deleted under a non-optional volume leaves the last content.
import { configMapPayload, fetchError, fetchOptional } from './payload.ts';
import type { VolumePlugin } from './types.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const configMapPluginName = 'kubernetes.io/configmap';

export function configMapPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: configMapPluginName,
    medium: '',
    canSupport: (spec) => Boolean(spec.volume?.configMap),
    async payload(host, spec, pod) {
      const source = spec.volume?.configMap ?? {};
      const optional = source.optional === true;
      const ns = pod.metadata?.namespace ?? 'default';
      const cm = await fetchOptional(
        () => host.getConfigMapFunc()(ns, source.name ?? ''),
        { metadata: { name: source.name, namespace: ns } },
        optional,
      ).catch((err) => {
        throw fetchError('ConfigMap', err);
      });
      return configMapPayload(source.items, cm, source.defaultMode, optional);
    },
    constructVolumeSpec: (name) => ({ volume: { name, configMap: { name } }, readOnly: false }),
  });
}
