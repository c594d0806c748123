// kubernetes.io/empty-dir (k/k pkg/volume/emptydir): a directory on disk, a
// tmpfs (medium Memory) or a hugetlbfs (medium HugePages[-<size>]). Also the
// wrapper under configMap/secret/downwardAPI/projected, named wrapped_<vol>.
import { chmod, lstat, mkdir, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type * as mount from '../mount/types.ts';
import { escapeQualifiedName } from '../volumehost/paths.ts';
import { removeAllOneFilesystem } from '../volumehost/removeall.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { podMemoryLimit, tmpfsNoswapSupported } from './memory.ts';
import { quantityToBigInt } from './quantity-bytes.ts';
import {
  type Attributes,
  type Mounter,
  type MounterArgs,
  type Spec,
  type Unmounter,
  VolumeError,
  type VolumePlugin,
} from './types.ts';
import { setVolumeOwnership } from './volume-ownership.ts';

export const emptyDirPluginName = 'kubernetes.io/empty-dir';
const escaped = escapeQualifiedName(emptyDirPluginName);
const TMPFS_MAGIC = 0x01021994;
const HUGETLBFS_MAGIC = 0x958458f6;

type Medium = 'Default' | 'Memory' | 'HugePages';

/** The ready marker lives outside the volume so containers cannot forge it. */
function metaDir(host: VolumeHost, podUID: string, volumeName: string): string {
  return join(host.getPodPluginDir(podUID, escaped), volumeName);
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

async function isReady(dir: string): Promise<boolean> {
  try {
    return (await stat(join(dir, 'ready'))).isFile();
  } catch {
    return false;
  }
}

async function setReady(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o750 });
  // os.Create in kubelet's SetReady: 0666 minus the umask.
  await writeFile(join(dir, 'ready'), '', { mode: 0o666 });
}

/** kubelet's GetMountMedium: what is mounted at `dir` right now. */
export async function mountMedium(
  mounter: mount.Interface,
  dir: string,
): Promise<{ medium: Medium; mounted: boolean; pageSize?: string }> {
  let notMnt: boolean;
  try {
    notMnt = await mounter.isLikelyNotMountPoint(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { medium: 'Default', mounted: false };
    throw err;
  }
  const { type } = await statfs(dir);
  if (type === TMPFS_MAGIC) return { medium: 'Memory', mounted: !notMnt };
  if (type === HUGETLBFS_MAGIC) {
    const entry = (await mounter.list()).find((m) => m.mountPoint === dir);
    const opt = [...(entry?.superOptions ?? []), ...(entry?.mountOptions ?? [])].find((o) =>
      o.startsWith('pagesize='),
    );
    const pageSize = opt ? `${opt.slice('pagesize='.length).replace(/[KMG]$/, (u) => `${u}i`)}` : undefined;
    return { medium: 'HugePages', mounted: !notMnt, pageSize };
  }
  return { medium: 'Default', mounted: !notMnt };
}

/** Page size of a HugePages medium: `HugePages-<size>` or the pod's single hugepages request. */
export function hugePageSize(pod: V1Pod, medium: string): string {
  if (medium.startsWith('HugePages-')) return medium.slice('HugePages-'.length);
  const sizes = new Set<string>();
  for (const c of [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]) {
    for (const list of [c.resources?.requests, c.resources?.limits]) {
      for (const key of Object.keys(list ?? {})) {
        if (key.startsWith('hugepages-')) sizes.add(key.slice('hugepages-'.length));
      }
    }
  }
  if (sizes.size === 0) {
    throw new VolumeError(
      'HugePagesNotRequested',
      'hugePages storage requested, but there is no resource request for huge pages',
    );
  }
  if (sizes.size > 1) {
    throw new VolumeError(
      'HugePagesMultipleSizes',
      "multiple huge page sizes requested: medium: HugePages can't be used if container requests multiple huge page sizes",
    );
  }
  return [...sizes][0];
}

/** kubelet's calculateEmptyDirMemorySize: min(node allocatable, pod memory limit, sizeLimit). */
export function emptyDirMemorySize(host: VolumeHost, pod: V1Pod, sizeLimit: string | undefined): bigint {
  let size = quantityToBigInt(host.getNodeAllocatable().memory ?? '0', 'node allocatable memory');
  const podLimit = podMemoryLimit(pod);
  if (podLimit > 0n && (size === 0n || podLimit <= size)) size = podLimit;
  if (sizeLimit !== undefined) {
    const limit = quantityToBigInt(sizeLimit, 'sizeLimit');
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
    const medium = this.#spec.volume?.emptyDir?.medium ?? '';
    const meta = metaDir(this.#host, this.#podUID, this.#name);
    const current = await mountMedium(mounter, dir);
    if (await isReady(meta)) {
      if (medium === 'Memory' && current.mounted && current.medium === 'Memory') return;
      if (medium === '' && (await exists(dir))) return;
      if (medium.startsWith('HugePages') && current.mounted && current.medium === 'HugePages') return;
      // Ready but the volume is gone (e.g. tmpfs lost across a reboot): set it up again.
      await rm(meta, { recursive: true, force: true });
    }
    if (medium === '') await setupDir(dir);
    else if (medium === 'Memory') await this.#setupTmpfs(dir, current);
    else if (medium === 'HugePages' || medium.startsWith('HugePages-'))
      await this.#setupHugepages(dir, medium, current);
    else throw new VolumeError('UnknownStorageMedium', `unknown storage medium "${medium}"`);
    if (args.fsGroup !== undefined) await setVolumeOwnership(dir, args.fsGroup, false);
    await setReady(meta);
  }

  async #setupTmpfs(dir: string, current: { medium: Medium; mounted: boolean }): Promise<void> {
    await setupDir(dir);
    if (current.mounted && current.medium === 'Memory') return;
    const size = emptyDirMemorySize(this.#host, this.#pod, this.#spec.volume?.emptyDir?.sizeLimit);
    const options = size > 0n ? [`size=${size}`] : [];
    if (await tmpfsNoswapSupported()) options.push('noswap');
    await this.#host.getMounter().mount('tmpfs', dir, 'tmpfs', options, { withoutSystemd: true });
  }

  async #setupHugepages(
    dir: string,
    medium: string,
    current: { medium: Medium; mounted: boolean; pageSize?: string },
  ): Promise<void> {
    const pageSize = hugePageSize(this.#pod, medium);
    await setupDir(dir);
    if (current.mounted && current.medium === 'HugePages') {
      if (current.pageSize === pageSize) return;
      throw new VolumeError(
        'HugePagesSizeMismatch',
        `mounted dir ${dir} pagesize '${current.pageSize}' and requested medium size '${pageSize}' differ`,
      );
    }
    await this.#host
      .getMounter()
      .mount('nodev', dir, 'hugetlbfs', [`pagesize=${pageSize}`], { withoutSystemd: true });
  }
}

/** 0777 regardless of umask, as kubelet's setupDir. */
async function setupDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o777 });
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new VolumeError('NotADirectory', `${dir} exists and is not a directory`);
  if ((st.mode & 0o7777) !== 0o777) await chmod(dir, 0o777);
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

  tearDown(): Promise<void> {
    return this.tearDownAt(this.getPath());
  }

  async tearDownAt(dir: string): Promise<void> {
    const mounter = this.#host.getMounter();
    await rm(metaDir(this.#host, this.#podUID, this.#name), { recursive: true, force: true });
    if (!(await exists(dir))) return;
    const current = await mountMedium(mounter, dir);
    if (current.mounted && current.medium !== 'Default') await mounter.unmount(dir);
    await removeAllOneFilesystem(mounter, dir);
  }
}

export function emptyDirPlugin(): VolumePlugin {
  let host: VolumeHost;
  return {
    name: emptyDirPluginName,
    init(h) {
      host = h;
    },
    getVolumeName: (spec) => spec.volume?.name ?? '',
    canSupport: (spec) => spec.volume?.emptyDir !== undefined && spec.volume.emptyDir !== null,
    requiresRemount: () => false,
    supportsMountOption: () => false,
    newMounter: (spec, pod) => new EmptyDirMounter(host, spec, pod),
    newUnmounter: (name, podUID) => new EmptyDirUnmounter(host, name, podUID),
    constructVolumeSpec: (name) => ({ volume: { name, emptyDir: {} }, readOnly: false }),
  };
}
