// kubernetes.io/secret: a secret's keys as files on a tmpfs wrapper, so the
// bytes never touch persistent disk.
import type { V1Pod } from '@kubernetes/client-node';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { fetchError, fetchOptional, secretPayload } from './payload.ts';
import type { Mounter, Spec, VolumePlugin } from './types.ts';
import { setUpWrapped, tearDownWrapped } from './wrapped-volume.ts';

export const secretPluginName = 'kubernetes.io/secret';
const escaped = escapeQualifiedName(secretPluginName);

function newMounter(host: VolumeHost, spec: Spec, pod: V1Pod): Mounter {
  const name = spec.volume?.name ?? '';
  const source = spec.volume?.secret ?? {};
  const path = host.getPodVolumeDir(pod.metadata?.uid ?? '', escaped, name);
  const mounter: Mounter = {
    getPath: () => path,
    getAttributes: () => ({ readOnly: true, managed: true, selinuxRelabel: true }),
    setUp: (args) => mounter.setUpAt(path, args),
    async setUpAt(dir, args) {
      const optional = source.optional === true;
      const ns = pod.metadata?.namespace ?? 'default';
      const secret = await fetchOptional(
        () => host.getSecretFunc()(ns, source.secretName ?? ''),
        { metadata: { name: source.secretName, namespace: ns } },
        optional,
      ).catch((err) => {
        throw fetchError('Secret', err);
      });
      const payload = secretPayload(source.items, secret, source.defaultMode, optional);
      await setUpWrapped({ host, pod, volumeName: name, medium: 'Memory', dir, args, payload });
    },
  };
  return mounter;
}

export function secretPlugin(): VolumePlugin {
  let host: VolumeHost;
  return {
    name: secretPluginName,
    init(h) {
      host = h;
    },
    getVolumeName: (spec) => spec.volume?.name ?? '',
    canSupport: (spec) => Boolean(spec.volume?.secret),
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
    constructVolumeSpec: (name) => ({ volume: { name, secret: { secretName: name } }, readOnly: false }),
  };
}
