// kubernetes.io/secret: a secret's keys as files on a tmpfs wrapper, so the
// bytes never touch persistent disk.
import { fetchError, fetchOptional, secretPayload } from './payload.ts';
import type { VolumePlugin } from './types.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const secretPluginName = 'kubernetes.io/secret';

export function secretPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: secretPluginName,
    medium: 'Memory',
    canSupport: (spec) => Boolean(spec.volume?.secret),
    async payload(host, spec, pod) {
      const source = spec.volume?.secret ?? {};
      const optional = source.optional === true;
      const ns = pod.metadata?.namespace ?? 'default';
      const secret = await fetchOptional(
        () => host.getSecretFunc()(ns, source.secretName ?? ''),
        { metadata: { name: source.secretName, namespace: ns } },
        optional,
      ).catch((err) => {
        throw fetchError('Secret', err);
      });
      return secretPayload(source.items, secret, source.defaultMode, optional);
    },
    constructVolumeSpec: (name) => ({ volume: { name, secret: { secretName: name } }, readOnly: false }),
  });
}
