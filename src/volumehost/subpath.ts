// kubelet's subpath.Interface (pkg/volume/util/subpath/subpath_linux.go) for
// a volumeMount's subPath. The path is resolved once, checked to stay inside
// the volume, then opened component by component without following any
// symlink (safe-fs.ts), and the open descriptor itself is bind-mounted
// (/proc/<pid>/fd/N with --no-canonicalize) to
// <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>: whatever the
// container swaps in after the check (CVE-2017-1002101, CVE-2021-25741), the
// mount is of the object that was checked. Subpath mounts are removed with
// their volume (CleanSubPaths), never by following a link.
import { lstat, mkdir, open, readdir, realpath, rmdir, stat, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { Logger } from '../logger.ts';
import type * as mount from '../mount/types.ts';
import { VolumeError } from '../plugins/types.ts';
import { podDir } from './paths.ts';
import { openPathBeneath, SafeDir, UnsafePathError } from './safe-fs.ts';

export const SUBPATH_DIR = 'volume-subpaths';

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
  /** CleanSubPaths: unmounts and removes every subpath mount of one volume of a pod. */
  cleanSubPaths(podUID: string, volumeName: string): Promise<void>;
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

const code = (err: unknown) => (err as NodeJS.ErrnoException)?.code;

export function createSubPather(o: { rootDir: string; mounter: mount.Interface; logger: Logger }): SubPather {
  const log = o.logger.child({ component: 'subpath' });

  /**
   * SafeMakeDir: each missing component is created inside the one before it,
   * which was opened without following symlinks, then chmod-ed to `perm`
   * (mkdir's mode is cut by the umask).
   */
  async function safeMakeDir(base: string, subPath: string, perm: number): Promise<void> {
    let cur = await SafeDir.openRoot(base);
    try {
      for (const part of subPath.split('/').filter((p) => p !== '' && p !== '.')) {
        let next: SafeDir;
        try {
          next = await cur.openChild(part, true);
        } catch (err) {
          if (code(err) !== 'ENOENT') throw err;
          await mkdir(cur.child(part), { mode: perm }).catch((e) => {
            if (code(e) !== 'EEXIST') throw e;
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
          err: (err as Error).message,
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
      await stat(hostPath);
    } catch (err) {
      if (code(err) !== 'ENOENT') throw refuse('failed to prepare subPath', err);
      exists = false;
    }
    if (!exists) {
      try {
        const perm = (await stat(req.volumePath)).mode & 0o7777;
        await safeMakeDir(await realpath(req.volumePath), req.subPath, perm);
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
    const volumePath = await realpath(req.volumePath);
    const path = await realpath(join(req.volumePath, req.subPath));
    if (!pathWithinBase(path, volumePath)) {
      throw new Error(`subpath "${path}" not within volume path "${volumePath}"`);
    }
    const rel = relative(volumePath, path);
    const fh =
      rel === ''
        ? await open(volumePath, 'r')
        : await openPathBeneath(volumePath, rel, { crossMounts: true });
    try {
      const st = await fh.stat();
      if (st.isSymbolicLink()) throw new UnsafePathError('symlink', path, 'unexpected symlink found');
      const target = subpathTarget(o.rootDir, req);
      // Already mounted by an earlier call for this container: the same file is reused.
      if (await o.mounter.isMountPoint(target).catch(() => false)) {
        const t = await lstat(target);
        if (t.dev === st.dev && t.ino === st.ino) return target;
        await o.mounter.unmount(target);
      }
      await mkdir(join(target, '..'), { recursive: true, mode: 0o750 });
      if (st.isDirectory()) {
        await mkdir(target, { mode: 0o750 }).catch((e) => {
          if (code(e) !== 'EEXIST') throw e;
        });
      } else {
        await writeFile(target, '', { mode: 0o640 });
      }
      try {
        await o.mounter.mount(`/proc/${process.pid}/fd/${fh.fd}`, target, '', ['bind'], {
          withoutSystemd: true,
          mountFlags: ['--no-canonicalize'],
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

  async function cleanOne(containerDir: string, entry: string): Promise<void> {
    await o.mounter.cleanupMountPoint(join(containerDir, entry), true);
  }

  async function cleanSubPaths(podUID: string, volumeName: string): Promise<void> {
    const volDir = join(podDir(o.rootDir, podUID), SUBPATH_DIR, volumeName);
    let containers: string[];
    try {
      containers = await readdir(volDir);
    } catch (err) {
      if (code(err) === 'ENOENT') return;
      throw new Error(`error reading ${volDir}: ${(err as Error).message}`);
    }
    for (const c of containers) {
      const containerDir = join(volDir, c);
      if (!(await lstat(containerDir)).isDirectory()) continue;
      for (const entry of await readdir(containerDir)) {
        try {
          await cleanOne(containerDir, entry);
        } catch (err) {
          throw new Error(
            `error cleaning subpath mount ${join(containerDir, entry)}: ${(err as Error).message}`,
          );
        }
      }
      await rmdir(containerDir);
    }
    await rmdir(volDir);
    await rmdir(join(podDir(o.rootDir, podUID), SUBPATH_DIR)).catch((err) => {
      if (code(err) !== 'ENOTEMPTY' && code(err) !== 'EEXIST' && code(err) !== 'ENOENT') throw err;
    });
  }

  return { prepare, cleanSubPaths };
}
