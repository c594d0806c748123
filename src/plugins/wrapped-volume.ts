// The shared SetUp/TearDown of the atomic-writer family (configMap, secret,
// downwardAPI, projected): an emptyDir wrapper named wrapped_<vol> (tmpfs for
// secret-bearing plugins) holds files written by the atomic writer.
import type { V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../errno.ts';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import { relativeBeneath, type SafeFs, UnsafePathError } from '../volumehost/safe-fs.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import type * as volume from '../volumehost/volume.ts';
import { operationFs, VolumeError } from '../volumehost/volume.ts';
import { makeNestedMountpoints } from './nested-mountpoints.ts';
import { AtomicWriteError, type FileProjection, writeAtomically } from './util/atomic-writer.ts';
import { setVolumeOwnership } from './volume-ownership.ts';

export type WrapperMedium = '' | 'Memory';

export const wrappedSpec = (medium: WrapperMedium): volume.Spec => ({
  volume: { name: 'wrapped', emptyDir: medium === '' ? {} : { medium } },
  readOnly: false,
});

async function hasData(fs: SafeFs, dir: string): Promise<boolean> {
  try {
    return (await fs.ops.lstat(`${dir}/..data`)).isSymbolicLink();
  } catch {
    return false;
  }
}

export interface WrappedSetUp {
  host: VolumeHost;
  pod: V1Pod;
  volumeName: string;
  medium: WrapperMedium;
  dir: string;
  args: volume.MounterArgs;
  /** Built BEFORE anything is created, so a failure to fetch data leaves an existing volume untouched. */
  payload: Map<string, FileProjection>;
}

export async function setUpWrapped(s: WrappedSetUp): Promise<void> {
  const fs = operationFs(s.host, s.args);
  const wasSetUp = await hasData(fs, s.dir);
  const wrapper = s.host.newWrapperMounter(s.volumeName, wrappedSpec(s.medium), s.pod);
  await wrapper.setUpAt(s.dir, s.args);
  try {
    // Everything below happens in the volume opened through directory fds: a
    // symlink planted in the pod directory is refused, not written through.
    const podsDir = s.host.getPodsDir();
    await fs.withDirBeneath(
      podsDir,
      relativeBeneath(podsDir, s.dir),
      async (dir) => {
        await makeNestedMountpoints(fs, s.volumeName, dir, s.pod);
        const logContext = `pod ${s.pod.metadata?.namespace}/${s.pod.metadata?.name} volume ${s.volumeName}`;
        const fsGroup = s.args.fsGroup;
        await writeAtomically(dir, s.payload, {
          logContext,
          setPerms:
            fsGroup === undefined
              ? undefined
              : // These volumes are read-only to containers (Attributes.ReadOnly), so kubelet
                // adds only group-read: a 0600 token file becomes 0640, a 0644 file stays.
                async () => {
                  await setVolumeOwnership(dir, fsGroup, { readOnly: true });
                },
        });
      },
      { crossMounts: 'last' },
    );
  } catch (err) {
    // kubelet tears the wrapper down on any failure; doing that to a volume that
    // was already serving a running pod would pull its files away, so only a
    // first-time set-up is rolled back.
    if (!wasSetUp)
      await tearDownWrapped(s.host, s.volumeName, s.medium, s.pod.metadata?.uid ?? '', s.dir, {
        fs,
      }).catch(() => {});
    if (err instanceof VolumeError || err instanceof UnsafePathError) throw err;
    const invalid = err instanceof AtomicWriteError && err.invalidPayload;
    throw new VolumeError(invalid ? 'InvalidPath' : 'WriteFailed', errorMessage(err), { cause: err });
  }
}

export async function tearDownWrapped(
  host: VolumeHost,
  volumeName: string,
  medium: WrapperMedium,
  podUID: string,
  dir: string,
  args: volume.UnmounterArgs | undefined,
): Promise<void> {
  await host.newWrapperUnmounter(volumeName, wrappedSpec(medium), podUID).tearDownAt(dir, args);
}

export interface WrappedPluginDef {
  name: string;
  medium: WrapperMedium;
  canSupport(spec: volume.Spec): boolean;
  /** Builds the files; runs before anything is created or changed on disk. */
  payload(
    host: VolumeHost,
    spec: volume.Spec,
    pod: V1Pod,
    args: volume.MounterArgs,
  ): Promise<Map<string, FileProjection>>;
  constructVolumeSpec(volumeName: string): volume.Spec;
  /** Extra clean-up after the files are gone (projected drops the pod's cached tokens). */
  afterTearDown?(host: VolumeHost, podUID: string): void;
}

/** A whole atomic-writer-family plugin from what differs between them. */
export function wrappedVolumePlugin(def: WrappedPluginDef): volume.VolumePlugin {
  const escaped = escapeQualifiedName(def.name);
  let host: VolumeHost;
  return {
    name: def.name,
    init(h) {
      host = h;
    },
    canSupport: (spec) => def.canSupport(spec),
    requiresRemount: () => true,
    newMounter(spec, pod): volume.Mounter {
      const volumeName = spec.volume?.name ?? '';
      const path = host.getPodVolumeDir(pod.metadata?.uid ?? '', escaped, volumeName);
      const mounter: volume.Mounter = {
        getPath: () => path,
        getAttributes: () => ({ readOnly: true, managed: true, selinuxRelabel: true }),
        setUp: (args) => mounter.setUpAt(path, args),
        async setUpAt(dir, args) {
          const payload = await def.payload(host, spec, pod, args);
          await setUpWrapped({ host, pod, volumeName, medium: def.medium, dir, args, payload });
        },
      };
      return mounter;
    },
    newUnmounter(volumeName, podUID): volume.Unmounter {
      const path = host.getPodVolumeDir(podUID, escaped, volumeName);
      const tearDownAt = async (dir: string, args?: volume.UnmounterArgs) => {
        await tearDownWrapped(host, volumeName, def.medium, podUID, dir, args);
        def.afterTearDown?.(host, podUID);
      };
      return { getPath: () => path, tearDown: (args) => tearDownAt(path, args), tearDownAt };
    },
    constructVolumeSpec: (volumeName) => def.constructVolumeSpec(volumeName),
  };
}
