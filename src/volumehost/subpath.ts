// kubelet's subpath.Interface (pkg/volume/util/subpath/subpath_linux.go) for
// a volumeMount's subPath. The path is resolved once, checked to stay inside
// the volume, then opened component by component without following any
// symlink (safe-fs.ts), and the open descriptor itself is bind-mounted
// (/proc/<pid>/fd/N with --no-canonicalize) to
// <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>: whatever the
// container swaps in after the check (CVE-2017-1002101, CVE-2021-25741), the
// mount is of the object that was checked. Subpath mounts are removed with
// their volume (CleanSubPaths) from open directories, never by following a
// link nor entering a mount.
import { dirname, join, relative, sep } from 'node:path';
import { errnoCode, errorMessage } from '../errno.ts';
import type { Logger } from '../logger.ts';
import { cleanupMountPoint } from '../mount/cleanup.ts';
import type * as mount from '../mount/types.ts';
import { O_RDONLY } from './fs.ts';
import { podDir } from './paths.ts';
import { relativeBeneath, type SafeDir, type SafeFs, UnsafePathError } from './safe-fs.ts';
import { VolumeError } from './volume.ts';

export const SUBPATH_DIR = 'volume-subpaths';

/** Entries of a subpath directory read at once (one per volumeMount of a container). */
const READ_BATCH = 4096;
const readNames = (dir: SafeDir) => dir.fs.readdirSome(dir.procPath, READ_BATCH);
/** Stacked bind mounts on one subpath target are unmounted one by one; this bounds the loop. */
const MAX_STACKED_SUBPATH_MOUNTS = 10;

export interface SubPathRequest {
  podUID: string;
  volumeName: string;
  /** The volume's SetUp path. */
  volumePath: string;
  containerName: string;
  /** The volumeMount's index in the container's volumeMounts. */
  index: number;
  /** Already checked: relative, no `..`. */
  subPath: string;
}

export interface SubPather {
  /** Creates a missing subPath, bind-mounts it safely, returns the bind target. */
  prepare(req: SubPathRequest): Promise<string>;
  /**
   * CleanSubPaths: unmounts and removes every subpath mount of one volume of
   * a pod, walking through `fs` (its unmount operation's, SafeFs.withHeldDirs)
   * or else the host's.
   */
  cleanSubPaths(podUID: string, volumeName: string, fs?: SafeFs): Promise<void>;
}

/** PathWithinBase. */
export function pathWithinBase(path: string, base: string): boolean {
  const rel = relative(base, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !rel.startsWith(sep));
}

export const subpathTarget = (
  root: string,
  r: Pick<SubPathRequest, 'podUID' | 'volumeName' | 'containerName' | 'index'>,
) => join(podDir(root, r.podUID), SUBPATH_DIR, r.volumeName, r.containerName, String(r.index));

export function createSubPather(o: {
  rootDir: string;
  mounter: mount.Interface;
  /** The host's (VolumeHost.getFs); an unmount's clean-up is handed its operation's. */
  fs: SafeFs;
  logger: Logger;
}): SubPather {
  const log = o.logger.child({ component: 'subpath' });

  /**
   * SafeMakeDir: each missing component is created inside the one before it,
   * which was opened without following symlinks, then chmod-ed to `perm`
   * (mkdir's mode is cut by the umask).
   */
  async function safeMakeDir(base: string, subPath: string, perm: number): Promise<void> {
    let cur = await o.fs.openRoot(base);
    try {
      for (const part of subPath.split('/').filter((p) => p !== '' && p !== '.')) {
        let next: SafeDir;
        try {
          next = await cur.openChild(part, true);
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
          await cur.fs.mkdir(cur.child(part), perm).catch((e) => {
            if (errnoCode(e) !== 'EEXIST') throw e;
          });
          next = await cur.openChild(part, true);
          await next.chmod(perm);
        }
        await cur.close();
        cur = next;
      }
    } finally {
      await cur.close();
    }
  }

  async function prepare(req: SubPathRequest): Promise<string> {
    const hostPath = join(req.volumePath, req.subPath);
    const refuse = (what: string, err: unknown) => {
      // Like kubelet, the caller is not told about the host's filesystem; the log is.
      log.warn(
        {
          podUID: req.podUID,
          volume: req.volumeName,
          container: req.containerName,
          subPath: req.subPath,
          err: errorMessage(err),
        },
        what,
      );
      return new VolumeError(
        'SubPathFailed',
        `${what} for volumeMount "${req.volumeName}" of container "${req.containerName}"`,
      );
    };
    let exists = true;
    try {
      await o.fs.ops.stat(hostPath);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw refuse('failed to prepare subPath', err);
      exists = false;
    }
    if (!exists) {
      try {
        const perm = (await o.fs.ops.stat(req.volumePath)).mode & 0o7777;
        await safeMakeDir(await o.fs.ops.realpath(req.volumePath), req.subPath, perm);
      } catch (err) {
        throw refuse('failed to create subPath directory', err);
      }
    }
    try {
      return await bindSubPath(req);
    } catch (err) {
      throw refuse('failed to prepare subPath', err);
    }
  }

  async function bindSubPath(req: SubPathRequest): Promise<string> {
    // Symlinks are evaluated once; from here on nothing is followed.
    const volumePath = await o.fs.ops.realpath(req.volumePath);
    const path = await o.fs.ops.realpath(join(req.volumePath, req.subPath));
    if (!pathWithinBase(path, volumePath)) {
      throw new Error(`subpath "${path}" not within volume path "${volumePath}"`);
    }
    const rel = relative(volumePath, path);
    const fh =
      rel === ''
        ? await o.fs.ops.open(volumePath, O_RDONLY)
        : await o.fs.openPathBeneath(volumePath, rel, { crossMounts: true });
    try {
      const st = await fh.stat();
      if (st.isSymbolicLink()) throw new UnsafePathError('symlink', path, 'unexpected symlink found');
      const target = subpathTarget(o.rootDir, req);
      // Already mounted by an earlier call for this container: the same file is reused.
      if (await o.mounter.isMountPoint(target).catch(() => false)) {
        const t = await o.fs.ops.lstat(target);
        if (t.dev === st.dev && t.ino === st.ino) return target;
        await o.mounter.unmount(target);
      }
      // The container's directory below the root, made without following a symlink; the
      // target in it (podvol's own new entry) as mkdir(2) and open(2) make it, minus the umask.
      const containerDir = await o.fs.openMkdirAll(
        o.rootDir,
        relativeBeneath(o.rootDir, dirname(target)),
        0o750,
      );
      try {
        const name = String(req.index);
        if (st.isDirectory()) {
          await containerDir.fs.mkdir(containerDir.child(name), 0o750).catch((e) => {
            if (errnoCode(e) !== 'EEXIST') throw e;
          });
        } else {
          await containerDir.writeFile(name, '', 0o640, { exactMode: false });
        }
      } finally {
        await containerDir.close();
      }
      try {
        // The mounter names every target to mount(8) without canonicalising (target.ts).
        await o.mounter.mount(`/proc/${process.pid}/fd/${fh.fd}`, target, '', ['bind'], {
          withoutSystemd: true,
        });
      } catch (err) {
        await cleanOne(join(target, '..'), String(req.index)).catch(() => {});
        throw err;
      }
      log.debug({ podUID: req.podUID, volume: req.volumeName, target }, 'bound subPath');
      return target;
    } finally {
      await fh.close();
    }
  }

  /** A subpath target left by a failed bind: unmounted if mounted, then removed (path-based, podvol's own new entry). */
  async function cleanOne(containerDir: string, entry: string): Promise<void> {
    await cleanupMountPoint(join(containerDir, entry), o.mounter, true, { fs: o.fs.ops, logger: log });
  }

  /**
   * One `<index>` entry of a container's subpath directory, relative to the
   * open directory: a symlink is unlinked (never followed), a mount point on
   * it (the subpath bind mount, told by its mnt_id) is unmounted through the
   * open parent, and what is left (podvol's empty directory or file) is
   * removed. A non-empty directory is an error: nothing but podvol's own
   * empty mount points is ever deleted.
   */
  async function cleanEntry(dir: SafeDir, name: string): Promise<void> {
    for (let unmounts = 0; ; unmounts++) {
      const fh = await dir.openEntry(name);
      if (!fh) return;
      let mounted: boolean;
      let isDir: boolean;
      try {
        const st = await fh.stat();
        if (st.isSymbolicLink()) {
          await dir.fs.unlink(dir.child(name)).catch((e) => {
            if (errnoCode(e) !== 'ENOENT') throw e;
          });
          return;
        }
        isDir = st.isDirectory();
        mounted = (await dir.fs.mountIdOf(fh.fd)) !== dir.mountId;
      } finally {
        // Closed before the unmount: an open descriptor on the mount would keep it busy.
        await fh.close();
      }
      if (!mounted) {
        try {
          await (isDir ? dir.fs.rmdir(dir.child(name)) : dir.fs.unlink(dir.child(name)));
        } catch (err) {
          if (errnoCode(err) === 'ENOENT') return;
          throw err;
        }
        return;
      }
      if (unmounts >= MAX_STACKED_SUBPATH_MOUNTS) {
        throw new Error(`still mounted after ${unmounts} unmounts`);
      }
      // /proc/<pid>/fd/<dir>/<name>: the kernel resolves the open directory, then only <name> in it.
      await o.mounter.unmount(`${dir.hostProcPath}/${name}`);
    }
  }

  /** `<volume>` below volume-subpaths: each container directory, then the directory itself. */
  async function cleanVolumeDir(subpaths: SafeDir, volumeName: string): Promise<void> {
    let volDir: SafeDir;
    try {
      volDir = await subpaths.openChild(volumeName);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      if (err instanceof UnsafePathError && err.kind !== 'mount') {
        // Not podvol's: a link (or file) where its directory should be is removed as such.
        await subpaths.fs.unlink(subpaths.child(volumeName));
        return;
      }
      throw err;
    }
    const errors: string[] = [];
    try {
      for (const c of await readNames(volDir)) {
        let containerDir: SafeDir;
        try {
          containerDir = await volDir.openChild(c);
        } catch (err) {
          if (errnoCode(err) === 'ENOENT') continue;
          if (err instanceof UnsafePathError && err.kind !== 'mount') {
            await volDir.fs.unlink(volDir.child(c)).catch((e) => errors.push(`${c}: ${errorMessage(e)}`));
          } else errors.push(`${c}: ${errorMessage(err)}`);
          continue;
        }
        try {
          for (const entry of await readNames(containerDir)) {
            try {
              await cleanEntry(containerDir, entry);
            } catch (err) {
              errors.push(`error cleaning subpath mount ${containerDir.path}/${entry}: ${errorMessage(err)}`);
            }
          }
        } finally {
          await containerDir.close();
        }
        await volDir.fs.rmdir(volDir.child(c)).catch((err) => {
          if (errnoCode(err) !== 'ENOENT') errors.push(`${volDir.path}/${c}: ${errorMessage(err)}`);
        });
      }
    } finally {
      await volDir.close();
    }
    if (errors.length > 0) throw new Error(errors.join('; '));
    await subpaths.fs.rmdir(subpaths.child(volumeName)).catch((err) => {
      if (errnoCode(err) !== 'ENOENT') throw err;
    });
  }

  /**
   * CleanSubPaths: every `<container>/<index>` below
   * <pod>/volume-subpaths/<volume>, walked from open directories (safe-fs):
   * no symlink is followed (one is unlinked as a link), no mount is entered,
   * and the only mounts touched are the subpath bind mounts themselves. Every
   * entry is tried; the errors are reported together, and the directories are
   * removed only once they are empty.
   */
  async function cleanSubPaths(podUID: string, volumeName: string, fs = o.fs): Promise<void> {
    let subpaths: SafeDir;
    try {
      subpaths = await fs.openDirBeneath(
        o.rootDir,
        relativeBeneath(o.rootDir, join(podDir(o.rootDir, podUID), SUBPATH_DIR)),
      );
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      // A link or mount on the way keeps its UnsafePath reason for /status.
      if (err instanceof UnsafePathError) throw err;
      throw new Error(`error reading subpaths of pod ${podUID}: ${errorMessage(err)}`);
    }
    try {
      await cleanVolumeDir(subpaths, volumeName);
    } finally {
      await subpaths.close();
    }
    // The pod's volume-subpaths directory goes with its last volume.
    await fs
      .withDirBeneath(o.rootDir, relativeBeneath(o.rootDir, podDir(o.rootDir, podUID)), (pd) =>
        pd.fs.rmdir(pd.child(SUBPATH_DIR)),
      )
      .catch((err) => {
        if (!['ENOTEMPTY', 'EEXIST', 'ENOENT'].includes(errnoCode(err) ?? '')) throw err;
      });
  }

  return { prepare, cleanSubPaths };
}
