// kubernetes.io/local-volume (k/k pkg/volume/local/local.go): a
// PersistentVolume with spec.local.path, a directory on this node that the
// pod's volume directory bind-mounts (one bind mount per pod, so several pods
// can use the same volume). The PV's required node affinity is checked for
// every PersistentVolume before SetUp (operation-generator.ts), as kubelet does.
//
// A path that is a block device (kubelet formats and mounts it under
// plugins/kubernetes.io/local-volume/mounts/) is refused with a reason:
// podvol does not format devices for local volumes.
import { dirname } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { errnoCode, errorMessage } from '../errno.ts';
import { cleanupMountPoint } from '../mount/cleanup.ts';
import { resolveInRoot } from '../volumehost/hostroot.ts';
import { escapeQualifiedName, hasBacksteps } from '../volumehost/paths.ts';
import { relativeBeneath } from '../volumehost/safe-fs.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import {
  type Attributes,
  type Mounter,
  type MounterArgs,
  operationFs,
  type Spec,
  specName,
  type Unmounter,
  VolumeError,
  type VolumePlugin,
} from '../volumehost/volume.ts';
import { KeyedMutex } from './util/keyed-mutex.ts';
import { setVolumeOwnership } from './volume-ownership.ts';

export const localPluginName = 'kubernetes.io/local-volume';
const escaped = escapeQualifiedName(localPluginName);

export function localVolumePlugin(): VolumePlugin {
  let host: VolumeHost;
  // kubelet's volumeLocks: SetUps of one local path run one at a time (the fsGroup check looks at the others).
  const locks = new KeyedMutex();
  const podVolumeDir = (uid: string, name: string) => host.getPodVolumeDir(uid, escaped, name);

  class LocalMounter implements Mounter {
    readonly #spec: Spec;
    readonly #pod: V1Pod;
    readonly #name: string;

    constructor(spec: Spec, pod: V1Pod) {
      if (!spec.persistentVolume?.spec?.local) {
        throw new VolumeError('UnknownVolumeSource', 'Spec does not reference a Local volume type');
      }
      this.#spec = spec;
      this.#pod = pod;
      this.#name = specName(spec);
      if (['', '.', '..'].includes(this.#name) || this.#name.includes('/')) {
        throw new VolumeError(
          'InvalidPath',
          `volume name ${JSON.stringify(this.#name)} cannot be a directory name`,
        );
      }
    }

    getPath(): string {
      return podVolumeDir(this.#pod.metadata?.uid ?? '', this.#name);
    }

    getAttributes(): Attributes {
      return { readOnly: this.#spec.readOnly, managed: !this.#spec.readOnly, selinuxRelabel: true };
    }

    setUp(args: MounterArgs): Promise<void> {
      return this.setUpAt(this.getPath(), args);
    }

    async setUpAt(dir: string, args: MounterArgs): Promise<void> {
      const path = this.#spec.persistentVolume?.spec?.local?.path ?? '';
      if (path === '') {
        throw new VolumeError('LocalPathInvalid', `LocalVolume volume "${this.#name}" path is empty`);
      }
      if (hasBacksteps(path))
        throw new VolumeError('InvalidPath', `invalid path: ${path} must not contain '..'`);
      // The host's path, under --host-root when podvol runs in a container.
      const source = await resolveInRoot(host.getHostRoot?.() ?? '/', path, host.getFs().ops);
      await locks.run(source, () => this.#setUpLocked(dir, source, args));
    }

    async #setUpLocked(dir: string, source: string, args: MounterArgs): Promise<void> {
      const fs = operationFs(host, args);
      let st: Awaited<ReturnType<typeof fs.ops.stat>>;
      try {
        st = await fs.ops.stat(source);
      } catch (err) {
        throw new VolumeError(
          'LocalPathInvalid',
          `local volume path ${source}: ${errnoCode(err) === 'ENOENT' ? 'no such file or directory' : errorMessage(err)}`,
        );
      }
      if (st.isBlockDevice()) {
        throw new VolumeError(
          'LocalBlockDeviceNotSupported',
          `local volume path ${source} is a block device: podvol does not format and mount block devices for local volumes (use a directory, or a CSI driver)`,
        );
      }
      if (!st.isDirectory()) {
        throw new VolumeError('LocalPathInvalid', 'only directory and block device are supported');
      }
      const mounter = host.getMounter();
      if (await mounter.isMountPoint(dir).catch(() => false)) return;
      // Other pods' bind mounts of the same directory: fsGroup ownership is applied by the first only.
      const podsDir = host.getPodsDir();
      const refs = (await mounter.getMountRefs(source).catch((): string[] => [])).filter((r) =>
        r.startsWith(`${podsDir}/`),
      );
      if (args.fsGroup !== undefined && refs.length > 0 && st.gid !== args.fsGroup) {
        const message = `The requested fsGroup is ${args.fsGroup}, but the volume ${this.#name} has GID ${st.gid}. The volume may not be shareable.`;
        // The SetUp goes on and succeeds, and the Event is logged only at debug: this is the log's line.
        host.getLogger().warn(
          {
            pod: `${this.#pod.metadata?.namespace}/${this.#pod.metadata?.name}`,
            volume: this.#name,
            reason: 'AlreadyMountedVolume',
          },
          message,
        );
        host.getEventRecorder().eventf(this.#pod, 'Warning', 'AlreadyMountedVolume', message);
      }
      // Nothing below is created through a symlink planted in the pod directory.
      await fs.mkdirAllBeneath(podsDir, relativeBeneath(podsDir, dirname(dir)), 0o750);
      await fs.mkdirAllBeneath(podsDir, relativeBeneath(podsDir, dir), 0o750);
      const options = ['bind', ...(this.#spec.readOnly ? ['ro'] : [])];
      const mountOptions = [...options, ...(this.#spec.persistentVolume?.spec?.mountOptions ?? [])];
      try {
        await mounter.mount(source, dir, '', mountOptions, { withoutSystemd: true });
      } catch (err) {
        // kubelet: undo a half-done mount and remove the directory, so the next try starts clean.
        await cleanupMountPoint(dir, mounter, true, { fs: fs.ops }).catch(() => {});
        throw err;
      }
      if (!this.#spec.readOnly && refs.length === 0 && args.fsGroup !== undefined) {
        const fsGroup = args.fsGroup;
        try {
          // Opened from the pods directory without following symlinks; the volume itself is the mount.
          await fs.withDirBeneath(
            podsDir,
            relativeBeneath(podsDir, dir),
            (d) =>
              setVolumeOwnership(d, fsGroup, {
                readOnly: false,
                fsGroupChangePolicy: args.fsGroupChangePolicy,
              }),
            { crossMounts: 'last' },
          );
        } catch (err) {
          throw new VolumeError('FSGroupFailed', `applying fsGroup ${args.fsGroup}: ${errorMessage(err)}`);
        }
      }
    }
  }

  class LocalUnmounter implements Unmounter {
    readonly #uid: string;
    readonly #name: string;
    constructor(name: string, uid: string) {
      this.#uid = uid;
      this.#name = name;
    }
    getPath(): string {
      return podVolumeDir(this.#uid, this.#name);
    }
    tearDown(): Promise<void> {
      return this.tearDownAt(this.getPath());
    }
    async tearDownAt(dir: string): Promise<void> {
      // The bind mount only: the local directory itself is never touched.
      await cleanupMountPoint(dir, host.getMounter(), true, { fs: host.getFs().ops });
    }
  }

  return {
    name: localPluginName,
    init(h) {
      host = h;
    },
    canSupport: (spec) => spec.persistentVolume?.spec?.local !== undefined,
    requiresRemount: () => false,
    newMounter: (spec, pod) => new LocalMounter(spec, pod),
    newUnmounter: (name, uid) => new LocalUnmounter(name, uid),
    // As kubelet: enough to unmount and clean up; the path is not needed for that.
    constructVolumeSpec: (name) => ({
      persistentVolume: { metadata: { name }, spec: { local: { path: '' }, volumeMode: 'Filesystem' } },
      readOnly: false,
    }),
  };
}
