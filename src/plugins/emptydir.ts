// kubernetes.io/empty-dir (k/k pkg/volume/emptydir): a directory on disk, a
// tmpfs (medium Memory) or a hugetlbfs (medium HugePages[-<size>]). Also the
// wrapper under configMap/secret/downwardAPI/projected, named wrapped_<vol>.
import { dirname, join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { errnoCode, errorMessage } from '../errno.ts';
import { TMPFS_MAGIC, tmpfsNoswapSupported } from '../mount/probe.ts';
import type * as mount from '../mount/types.ts';
import type { FsOps } from '../volumehost/fs.ts';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import { relativeBeneath, type SafeFs } from '../volumehost/safe-fs.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import type {
  Attributes,
  Mounter,
  MounterArgs,
  Spec,
  Unmounter,
  UnmounterArgs,
  VolumePlugin,
} from '../volumehost/volume.ts';
import { operationFs, VolumeError } from '../volumehost/volume.ts';
import {
  compareQuantities,
  formatQuantity,
  parseQuantity,
  type Quantity,
  QuantityError,
  volumeByteSize,
} from './util/quantity.ts';
import {
  hugePageRequestLists,
  hugePageSizeFromMedium,
  hugePageSizeFromResourceName,
  hugePagesResourcePrefix,
  isHugePageMedium,
  podCgroupMemoryLimit,
} from './util/resources.ts';
import { setVolumeOwnership } from './volume-ownership.ts';

export const emptyDirPluginName = 'kubernetes.io/empty-dir';
const escaped = escapeQualifiedName(emptyDirPluginName);
const HUGETLBFS_MAGIC = 0x958458f6;

type Medium = 'Default' | 'Memory' | 'HugePages';

/** The ready marker lives outside the volume so containers cannot forge it. */
function metaDir(host: VolumeHost, podUID: string, volumeName: string): string {
  return join(host.getPodPluginDir(podUID, escaped), volumeName);
}

async function exists(fs: SafeFs, path: string): Promise<boolean> {
  try {
    await fs.ops.lstat(path);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

async function isReady(fs: SafeFs, dir: string): Promise<boolean> {
  try {
    return (await fs.ops.stat(join(dir, 'ready'))).isFile();
  } catch {
    return false;
  }
}

async function setReady(fs: SafeFs, podsDir: string, dir: string): Promise<void> {
  const meta = await fs.openMkdirAll(podsDir, relativeBeneath(podsDir, dir), 0o750);
  try {
    // os.Create in kubelet's SetReady: 0666 minus the umask.
    await meta.writeFile('ready', '', 0o666, { exactMode: false });
  } finally {
    await meta.close();
  }
}

/** What is mounted at a directory, as kubelet's GetMountMedium reports it. */
export interface MountMedium {
  medium: Medium;
  mounted: boolean;
  /** The hugetlbfs page size; read only when the requested medium names a size, as in kubelet. */
  pageSize?: Quantity;
}

/** kubelet's getPageSize: the `pagesize=` option of the hugetlbfs mounted at `dir`, with an `i` appended. */
async function mountedPageSize(mounter: mount.Interface, dir: string): Promise<Quantity> {
  const entry = (await mounter.list()).find((m) => m.mountPoint === dir);
  if (!entry) throw new VolumeError('HugePagesSizeUnknown', `mount point for ${dir} not found`);
  const opt = [...(entry.mountOptions ?? []), ...(entry.superOptions ?? [])]
    .map((o) => o.trim())
    .find((o) => o.startsWith('pagesize='));
  if (!opt) throw new VolumeError('HugePagesSizeUnknown', `no pagesize option specified for ${dir} mount`);
  try {
    return parseQuantity(`${opt.slice('pagesize='.length)}i`);
  } catch (err) {
    throw new VolumeError(
      'HugePagesSizeUnknown',
      `error getting page size from '${opt}' mount option: ${goQuantityError(err)}`,
    );
  }
}

/** kubelet's GetMountMedium: what is mounted at `dir` right now. */
export async function mountMedium(
  mounter: mount.Interface,
  fs: Pick<FsOps, 'statfsType'>,
  dir: string,
  requestedMedium = '',
): Promise<MountMedium> {
  let notMnt: boolean;
  try {
    notMnt = await mounter.isLikelyNotMountPoint(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return { medium: 'Default', mounted: false };
    throw err;
  }
  const type = await fs.statfsType(dir);
  if (type === TMPFS_MAGIC) return { medium: 'Memory', mounted: !notMnt };
  if (type === HUGETLBFS_MAGIC) {
    // Skip page size detection if requested medium doesn't have size specified (kubelet).
    if (requestedMedium === 'HugePages') return { medium: 'HugePages', mounted: !notMnt };
    return { medium: 'HugePages', mounted: !notMnt, pageSize: await mountedPageSize(mounter, dir) };
  }
  return { medium: 'Default', mounted: !notMnt };
}

/** The bare text of a quantity parse error, as Go's resource.ParseQuantity words it. */
function goQuantityError(err: unknown): string {
  return err instanceof QuantityError ? err.detail : errorMessage(err);
}

/**
 * kubelet's getPageSizeMountOption: `pagesize=<size>` for a HugePages medium.
 * `HugePages-<size>` needs a hugepages request of that size; plain `HugePages`
 * takes the one size requested. Requests are the pod-level ones (when pod-level
 * resources are set) and every app and init container's; limits equal requests
 * for hugepages, so kubelet looks at requests only.
 */
export function pageSizeMountOption(medium: string, pod: V1Pod): string {
  let mediumPageSize: Quantity | undefined;
  if (medium !== 'HugePages') {
    try {
      mediumPageSize = hugePageSizeFromMedium(medium);
    } catch (err) {
      throw new VolumeError('InvalidHugePagesMedium', goQuantityError(err));
    }
  }
  let pageSize: Quantity | undefined;
  for (const list of hugePageRequestLists(pod)) {
    for (const name of Object.keys(list)) {
      if (!name.startsWith(hugePagesResourcePrefix)) continue;
      let current: Quantity;
      try {
        current = hugePageSizeFromResourceName(name);
      } catch (err) {
        throw new VolumeError('InvalidQuantity', goQuantityError(err));
      }
      if (mediumPageSize === undefined) {
        if (pageSize !== undefined && compareQuantities(pageSize, current) !== 0) {
          throw new VolumeError(
            'HugePagesMultipleSizes',
            `medium: ${medium} can't be used if container requests multiple huge page sizes`,
          );
        }
        pageSize = current;
      } else if (compareQuantities(current, mediumPageSize) === 0) {
        pageSize = current;
      }
    }
  }
  if (pageSize === undefined) {
    throw new VolumeError(
      'HugePagesNotRequested',
      `medium ${medium}: hugePages storage requested, but there is no resource request for huge pages`,
    );
  }
  return `pagesize=${formatQuantity(pageSize)}`;
}

/**
 * kubelet's calculateEmptyDirMemorySize: node allocatable memory, lowered to the
 * pod's cgroup memory limit (ResourceConfigForPod: pod-level resources, sidecars
 * and overhead included) and then to `sizeLimit`, each only when 0 < value <= size.
 */
export function emptyDirMemorySize(host: VolumeHost, pod: V1Pod, sizeLimit: string | undefined): bigint {
  let size = volumeByteSize(host.getNodeAllocatable().memory ?? '0', 'node allocatable memory');
  const podLimit = podCgroupMemoryLimit(pod) ?? 0n;
  if (podLimit > 0n && (size === 0n || podLimit <= size)) size = podLimit;
  if (sizeLimit !== undefined) {
    let limit: bigint;
    try {
      limit = volumeByteSize(sizeLimit, 'sizeLimit');
    } catch (err) {
      // The API server admits a sizeLimit beyond int64 bytes; it is larger than any node, so it changes nothing.
      if (err instanceof VolumeError && err.cause instanceof QuantityError && err.cause.tooLarge) return size;
      throw err;
    }
    if (limit > 0n && (size === 0n || limit <= size)) size = limit;
  }
  return size;
}

class EmptyDirMounter implements Mounter {
  readonly #host: VolumeHost;
  readonly #spec: Spec;
  readonly #pod: V1Pod;
  readonly #podUID: string;
  readonly #name: string;

  constructor(host: VolumeHost, spec: Spec, pod: V1Pod) {
    this.#host = host;
    this.#spec = spec;
    this.#pod = pod;
    this.#podUID = pod.metadata?.uid ?? '';
    this.#name = spec.volume?.name ?? '';
  }

  getPath(): string {
    return this.#host.getPodVolumeDir(this.#podUID, escaped, this.#name);
  }

  getAttributes(): Attributes {
    return { readOnly: false, managed: true, selinuxRelabel: true };
  }

  setUp(args: MounterArgs): Promise<void> {
    return this.setUpAt(this.getPath(), args);
  }

  async setUpAt(dir: string, args: MounterArgs): Promise<void> {
    const mounter = this.#host.getMounter();
    const fs = operationFs(this.#host, args);
    const medium = this.#spec.volume?.emptyDir?.medium ?? '';
    const meta = metaDir(this.#host, this.#podUID, this.#name);
    const podsDir = this.#host.getPodsDir();
    // Nothing below is done through a symlink planted in the pod directory.
    await fs.mkdirAllBeneath(podsDir, relativeBeneath(podsDir, dirname(dir)), 0o777);
    if (await isReady(fs, meta)) {
      let notMnt = true;
      try {
        notMnt = await mounter.isLikelyNotMountPoint(dir);
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw err;
      }
      if (medium === 'Memory' && !notMnt) return;
      if (medium === '') {
        if (await exists(fs, dir)) return;
        // Ready but the volume directory is gone (removed by hand): set it up again.
        await fs.removeAllBeneath(podsDir, relativeBeneath(podsDir, meta));
      }
    }
    let failure: unknown;
    try {
      if (medium === '') await setupDir(fs, podsDir, dir);
      else if (medium === 'Memory') await this.#setupTmpfs(fs, dir);
      else if (isHugePageMedium(medium)) await this.#setupHugepages(fs, dir, medium);
      else throw new VolumeError('UnknownStorageMedium', `unknown storage medium "${medium}"`);
    } catch (err) {
      failure = err;
    }
    // kubelet applies fsGroup whatever the outcome (errors ignored), and never
    // honours fsGroupChangePolicy on an emptyDir: it is always walked. The
    // volume is opened without following symlinks: containers can write to it.
    if (args.fsGroup !== undefined) {
      const fsGroup = args.fsGroup;
      await fs
        .withDirBeneath(
          podsDir,
          relativeBeneath(podsDir, dir),
          (d) => setVolumeOwnership(d, fsGroup, { readOnly: false }),
          { crossMounts: 'last' },
        )
        .catch(() => {});
    }
    if (failure !== undefined) throw failure;
    await setReady(fs, podsDir, meta);
  }

  async #setupTmpfs(fs: SafeFs, dir: string): Promise<void> {
    await setupDir(fs, this.#host.getPodsDir(), dir);
    const current = await mountMedium(this.#host.getMounter(), fs.ops, dir, 'Memory');
    if (current.mounted && current.medium === 'Memory') return;
    const size = emptyDirMemorySize(this.#host, this.#pod, this.#spec.volume?.emptyDir?.sizeLimit);
    const options = size > 0n ? [`size=${size}`] : [];
    if (await tmpfsNoswapSupported()) options.push('noswap');
    await this.#host.getMounter().mount('tmpfs', dir, 'tmpfs', options, { withoutSystemd: true });
  }

  async #setupHugepages(fs: SafeFs, dir: string, medium: string): Promise<void> {
    await setupDir(fs, this.#host.getPodsDir(), dir);
    const current = await mountMedium(this.#host.getMounter(), fs.ops, dir, medium);
    if (current.mounted && current.medium === 'HugePages') {
      if (medium === 'HugePages') return;
      const uid = this.#podUID;
      if (current.pageSize === undefined)
        throw new VolumeError(
          'HugePagesSizeUnknown',
          `pod ${uid}: mounted dir ${dir} pagesize is not determined`,
        );
      let mediumSize: Quantity;
      try {
        mediumSize = hugePageSizeFromMedium(medium);
      } catch (err) {
        throw new VolumeError('InvalidHugePagesMedium', goQuantityError(err));
      }
      if (compareQuantities(mediumSize, current.pageSize) !== 0) {
        throw new VolumeError(
          'HugePagesSizeMismatch',
          `pod ${uid}: mounted dir ${dir} pagesize '${formatQuantity(current.pageSize)}' and requested medium size '${formatQuantity(mediumSize)}' differ`,
        );
      }
      return;
    }
    const option = pageSizeMountOption(medium, this.#pod);
    await this.#host.getMounter().mount('nodev', dir, 'hugetlbfs', [option], { withoutSystemd: true });
  }
}

/**
 * 0777 regardless of umask, as kubelet's setupDir; created and chmodded
 * through directory fds, so a symlink in the pod directory is refused, not
 * followed. The volume itself may already be a mount point (a tmpfs).
 */
async function setupDir(fs: SafeFs, podsDir: string, dir: string): Promise<void> {
  const d = await fs.openMkdirAll(podsDir, relativeBeneath(podsDir, dir), 0o777, { crossMounts: 'last' });
  try {
    const st = await d.stat();
    if ((st.mode & 0o7777) !== 0o777) await d.chmod(0o777);
  } finally {
    await d.close();
  }
}

class EmptyDirUnmounter implements Unmounter {
  readonly #host: VolumeHost;
  readonly #podUID: string;
  readonly #name: string;

  constructor(host: VolumeHost, name: string, podUID: string) {
    this.#host = host;
    this.#podUID = podUID;
    this.#name = name;
  }

  getPath(): string {
    return this.#host.getPodVolumeDir(this.#podUID, escaped, this.#name);
  }

  tearDown(args?: UnmounterArgs): Promise<void> {
    return this.tearDownAt(this.getPath(), args);
  }

  async tearDownAt(dir: string, args?: UnmounterArgs): Promise<void> {
    const mounter = this.#host.getMounter();
    const fs = operationFs(this.#host, args);
    const podsDir = this.#host.getPodsDir();
    await fs.removeAllBeneath(
      podsDir,
      relativeBeneath(podsDir, metaDir(this.#host, this.#podUID, this.#name)),
    );
    if (!(await exists(fs, dir))) return;
    // The path must lead to the volume without a symlink before anything is unmounted at it.
    await (await fs.openDirBeneath(podsDir, relativeBeneath(podsDir, dir), { crossMounts: 'last' })).close();
    // The page size does not matter for an unmount, so it is not looked up.
    const current = await mountMedium(mounter, fs.ops, dir, 'HugePages');
    if (current.mounted && current.medium !== 'Default') await mounter.unmount(dir);
    await fs.removeAllBeneath(podsDir, relativeBeneath(podsDir, dir));
  }
}

export function emptyDirPlugin(): VolumePlugin {
  let host: VolumeHost;
  return {
    name: emptyDirPluginName,
    init(h) {
      host = h;
    },
    canSupport: (spec) => spec.volume?.emptyDir !== undefined && spec.volume.emptyDir !== null,
    requiresRemount: () => false,
    newMounter: (spec, pod) => new EmptyDirMounter(host, spec, pod),
    newUnmounter: (name, podUID) => new EmptyDirUnmounter(host, name, podUID),
    constructVolumeSpec: (name) => ({ volume: { name, emptyDir: {} }, readOnly: false }),
  };
}
