// Which CSI volumes are staged on this node and which pod volume directories
// publish each of them. kubelet answers "may this volume be unstaged?" by
// asking the disk every time (GetMountRefs, every pod's vol_data.json); done
// that way, tearing down N pods reads O(N²) files and the orphan sweep reads
// every json of the node every housekeeping pass. The index is read from the
// vol_data.json files once, before the plugin's first operation (at start,
// with reconstruction), and then kept by the operations that write and remove
// those files: it is the only place that decides who uses a staged volume.
//
// Entries are candidates, checked against the disk when they matter: before
// an unstage, the (few) directories listed as users are read again, so a pod
// directory removed behind podvol's back (orphan cleanup of a directory with
// a leftover json) never keeps a volume staged forever, and a listed user is
// never trusted without its file.
import { join } from 'node:path';
import type { FsOps } from '../../volumehost/fs.ts';
import { escapeQualifiedName } from '../../volumehost/paths.ts';
import { csiPluginName, loadVolumeData, uniqueVolumeName, volDataKey } from './vol-data.ts';

export interface StagedVolume {
  driver: string;
  handle: string;
}

export interface VolumeIndexDirs {
  /** The host's filesystem (VolumeHost.getFs().ops). */
  fs: FsOps;
  /** <root>/pods */
  podsDir: string;
  /** <root>/plugins/kubernetes.io/csi */
  pluginDir: string;
}

const escapedName = escapeQualifiedName(csiPluginName);

export class VolumeIndex {
  readonly #dirs: () => VolumeIndexDirs;
  /** unique volume name → the pod volume directories (holding vol_data.json) that name it. */
  readonly #users = new Map<string, Set<string>>();
  /** pod volume directory → the unique volume name its vol_data.json names. */
  readonly #byDir = new Map<string, string>();
  /** unique volume name → a staging vol_data.json exists for it. */
  readonly #staged = new Map<string, StagedVolume>();
  #loaded: Promise<void> | undefined;

  constructor(dirs: () => VolumeIndexDirs) {
    this.#dirs = dirs;
  }

  /** Reads every vol_data.json once; every later call returns the same promise. */
  load(): Promise<void> {
    this.#loaded ??= this.#scan();
    return this.#loaded;
  }

  async #scan(): Promise<void> {
    const { fs, podsDir, pluginDir } = this.#dirs();
    for (const uid of await list(fs, podsDir)) {
      const base = join(podsDir, uid, 'volumes', escapedName);
      for (const inner of await list(fs, base)) {
        const dir = join(base, inner);
        const data = await loadVolumeData(fs, dir).catch(() => undefined);
        const driver = data?.[volDataKey.driverName];
        const handle = data?.[volDataKey.volHandle];
        if (driver && handle) this.addUser(dir, driver, handle);
      }
    }
    for (const driver of await list(fs, pluginDir)) {
      for (const hash of await list(fs, join(pluginDir, driver))) {
        const data = await loadVolumeData(fs, join(pluginDir, driver, hash)).catch(() => undefined);
        const handle = data?.[volDataKey.volHandle];
        // A json naming another driver than its directory is not ours to act on.
        if (handle && data?.[volDataKey.driverName] === driver) this.addStaged(driver, handle);
      }
    }
  }

  /** A pod volume directory's vol_data.json now names driver^handle. */
  addUser(dir: string, driver: string, handle: string): void {
    this.removeUser(dir);
    const unique = uniqueVolumeName(driver, handle);
    this.#byDir.set(dir, unique);
    const set = this.#users.get(unique) ?? new Set<string>();
    set.add(dir);
    this.#users.set(unique, set);
  }

  /** The pod volume directory's vol_data.json is gone. */
  removeUser(dir: string): void {
    const unique = this.#byDir.get(dir);
    if (unique === undefined) return;
    this.#byDir.delete(dir);
    const set = this.#users.get(unique);
    set?.delete(dir);
    if (set?.size === 0) this.#users.delete(unique);
  }

  addStaged(driver: string, handle: string): void {
    this.#staged.set(uniqueVolumeName(driver, handle), { driver, handle });
  }

  removeStaged(driver: string, handle: string): void {
    this.#staged.delete(uniqueVolumeName(driver, handle));
  }

  /** Volumes with a staging json: the devices reconstruction puts in the actual state. */
  staged(): StagedVolume[] {
    return [...this.#staged.values()];
  }

  /** Whether the index lists any pod volume directory for driver^handle (no disk access). */
  hasUsers(driver: string, handle: string): boolean {
    return (this.#users.get(uniqueVolumeName(driver, handle))?.size ?? 0) > 0;
  }

  /**
   * The pod volume directories that use driver^handle, each checked on disk:
   * a listed directory whose vol_data.json is gone or names something else is
   * dropped from the index. An unreadable json counts as a user (never unstage
   * on a doubt).
   */
  async users(driver: string, handle: string): Promise<string[]> {
    const unique = uniqueVolumeName(driver, handle);
    const out: string[] = [];
    for (const dir of [...(this.#users.get(unique) ?? [])]) {
      let data: Record<string, string> | undefined;
      try {
        data = await loadVolumeData(this.#dirs().fs, dir);
      } catch {
        out.push(dir);
        continue;
      }
      if (data?.[volDataKey.driverName] === driver && data?.[volDataKey.volHandle] === handle) out.push(dir);
      else this.removeUser(dir);
    }
    return out;
  }
}

async function list(fs: FsOps, dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch {
    return [];
  }
}
