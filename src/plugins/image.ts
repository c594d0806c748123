// kubernetes.io/image (k/k pkg/volume/image/image.go): a stub that lets the
// volume manager account for `image` volumes. The container runtime mounts
// the image (or OCI artifact) itself, so SetUp and TearDown succeed without
// touching the host and the volume has no path on it: the runtime reads the
// reference and pull policy from the pod spec (see `podvol mounts`).
import type { V1ImageVolumeSource } from '@kubernetes/client-node';
import type { Mounter, Spec, Unmounter, VolumePlugin } from '../volumehost/volume.ts';

export const imagePluginName = 'kubernetes.io/image';

const source = (spec: Spec): V1ImageVolumeSource | undefined => spec.volume?.image ?? undefined;

const mounter: Mounter = {
  getPath: () => '',
  getAttributes: () => ({ readOnly: true, managed: false, selinuxRelabel: false }),
  setUp: async () => {},
  setUpAt: async () => {},
};

const unmounter: Unmounter = {
  getPath: () => '',
  tearDown: async () => {},
  tearDownAt: async () => {},
};

export function imagePlugin(): VolumePlugin {
  return {
    name: imagePluginName,
    init() {},
    canSupport: (spec) => source(spec) !== undefined,
    requiresRemount: () => false,
    newMounter: () => mounter,
    newUnmounter: () => unmounter,
    // kubelet reconstructs nothing: there is nothing on disk to find.
    constructVolumeSpec: (name) => ({ volume: { name, image: {} }, readOnly: true }),
  };
}
