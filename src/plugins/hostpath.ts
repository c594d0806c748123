// kubernetes.io/host-path (k/k pkg/volume/hostpath/host_path.go): nothing is
// mounted; the runtime binds the host path itself. SetUp only validates the
// path and applies the HostPathType check, creating what *OrCreate asks for.
import { dirname, join, resolve } from 'node:path';
import type { V1HostPathVolumeSource } from '@kubernetes/client-node';
import { errnoCode, errorMessage } from '../errno.ts';
import { type DeadlineStat, statWithDeadline } from '../mount/deadline-stat.ts';
import { type FsOps, O_APPEND, O_CREAT, O_WRONLY } from '../volumehost/fs.ts';
import { resolveInRoot } from '../volumehost/hostroot.ts';
import { hasBacksteps } from '../volumehost/paths.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { type Mounter, type Spec, VolumeError, type VolumePlugin } from '../volumehost/volume.ts';

export const hostPathPluginName = 'kubernetes.io/host-path';

type FileType = 'Directory' | 'File' | 'Socket' | 'CharDevice' | 'BlockDevice';

/** stat(2) following links, with a deadline (the daemon's: its volume host's StatProbe). */
export type FollowingStat = (path: string) => Promise<DeadlineStat>;

/** A probe of its own per call, for callers without a volume host (tests). */
const statEachTime: FollowingStat = (path) => statWithDeadline(path, { follow: true });

/**
 * os.Stat of the host path in a child process with a deadline, not through
 * `fs`: the path may be on a filesystem whose server hangs (see
 * deadline-stat.ts). A filesystem that does not answer is
 * FilesystemUnresponsive, and nothing of the daemon waits on it.
 */
async function statHostPath(path: string, stat: FollowingStat): Promise<DeadlineStat> {
  const st = await stat(path);
  if (st.state === 'timed-out') throw new VolumeError('FilesystemUnresponsive', st.message);
  return st;
}

/** mount-utils PathExists: ENOENT is "no", any other stat error counts as present but unusable. */
async function exists(path: string, stat: FollowingStat): Promise<boolean> {
  return (await statHostPath(path, stat)).state === 'ok';
}

/** hostutil.GetFileType: stat follows symlinks, as kubelet's does. */
async function fileType(path: string, stat: FollowingStat): Promise<FileType> {
  const st = await statHostPath(path, stat);
  if (st.state === 'error') throw new Error(st.message);
  if (st.state === 'ok' && st.type !== 'Symlink' && st.type !== 'Other') return st.type;
  throw new Error('only recognise file, directory, socket, block device and character device');
}

async function typeMatchedOrError(
  path: string,
  expected: FileType,
  description: string,
  stat: FollowingStat,
): Promise<void> {
  if (!(await exists(path, stat)))
    throw new VolumeError('HostPathNotFound', `hostPath ${path} doesn't exist`);
  let actual: FileType;
  try {
    actual = await fileType(path, stat);
  } catch (err) {
    if (err instanceof VolumeError) throw err;
    throw new VolumeError(
      'HostPathTypeMismatch',
      `hostPath type check failed, ${path} is not a ${description}, unable to determine its type: ${errorMessage(err)}`,
    );
  }
  if (actual !== expected) {
    throw new VolumeError(
      'HostPathTypeMismatch',
      `hostPath type check failed: ${path} is not a ${description}, it's a ${actual}`,
    );
  }
}

/** A Node fs error worded as Go's *PathError: `<op> <path>: <strerror>`. */
function goPathError(op: string, path: string, err: unknown): NodeJS.ErrnoException {
  const text = errorMessage(err)
    .replace(/^[A-Z0-9]+: /, '')
    .replace(/, [a-z]+ '.*'$/, '');
  const out: NodeJS.ErrnoException = new Error(`${op} ${path}: ${text}`);
  out.code = errnoCode(err);
  return out;
}

/**
 * Go's os.MkdirAll, step for step. Unlike Node's recursive mkdir, a dangling
 * symlink on the way is not followed: mkdir fails with EEXIST on it and, as it
 * is no directory, that error is returned.
 */
async function mkdirAll(fs: FsOps, path: string, mode: number): Promise<void> {
  const st = await fs.stat(path).catch(() => undefined);
  if (st) {
    if (st.isDirectory()) return;
    const e: NodeJS.ErrnoException = new Error(`mkdir ${path}: not a directory`);
    e.code = 'ENOTDIR';
    throw e;
  }
  const parent = dirname(path.replace(/\/+$/, ''));
  if (parent !== path && parent !== '/' && parent !== '.') await mkdirAll(fs, parent, mode);
  try {
    await fs.mkdir(path, mode);
  } catch (err) {
    // Go: "Handle arguments like foo/. by asking the underlying filesystem."
    if ((await fs.lstat(path).catch(() => undefined))?.isDirectory()) return;
    throw goPathError('mkdir', path, err);
  }
}

/**
 * hostPath's makeDir: MkdirAll(path, 0755), where "already exists" is success.
 * On a dangling symlink (at the path or on the way) that means success without
 * creating anything, exactly as kubelet behaves.
 */
async function makeDir(fs: FsOps, path: string): Promise<void> {
  try {
    await mkdirAll(fs, path, 0o755);
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') throw new VolumeError('HostPathCreateFailed', errorMessage(err));
  }
}

export async function checkHostPathType(
  path: string,
  type: string,
  fs: FsOps,
  stat: FollowingStat = statEachTime,
): Promise<void> {
  switch (type) {
    case 'DirectoryOrCreate':
      if (!(await exists(path, stat))) return makeDir(fs, path);
      return typeMatchedOrError(path, 'Directory', 'directory', stat);
    case 'Directory':
      return typeMatchedOrError(path, 'Directory', 'directory', stat);
    case 'FileOrCreate':
      if (!(await exists(path, stat))) {
        // O_CREATE without O_EXCL, as Go's OpenFile: an existing entry is fine.
        const flags = O_WRONLY | O_APPEND | O_CREAT;
        const fh = await fs.open(path, flags, 0o644).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'EEXIST') return undefined;
          throw new VolumeError('HostPathCreateFailed', goPathError('open', path, err).message);
        });
        await fh?.close();
        return;
      }
      return typeMatchedOrError(path, 'File', 'file', stat);
    case 'File':
      return typeMatchedOrError(path, 'File', 'file', stat);
    case 'Socket':
      return typeMatchedOrError(path, 'Socket', 'socket file', stat);
    case 'CharDevice':
      return typeMatchedOrError(path, 'CharDevice', 'character device', stat);
    case 'BlockDevice':
      return typeMatchedOrError(path, 'BlockDevice', 'block device', stat);
    default:
      throw new VolumeError('InvalidHostPathType', `${type} is an invalid volume type`);
  }
}

/** validation.ValidatePathNoBacksteps. */
export function validatePathNoBacksteps(path: string): void {
  if (hasBacksteps(path)) {
    throw new VolumeError('InvalidPath', `invalid HostPath \`${path}\`: must not contain '..'`);
  }
}

function source(spec: Spec): V1HostPathVolumeSource {
  const src = spec.volume?.hostPath ?? spec.persistentVolume?.spec?.hostPath;
  if (!src) throw new VolumeError('UnknownVolumeSource', 'spec does not reference an HostPath volume type');
  return src;
}

export function hostPathPlugin(): VolumePlugin {
  // The host tells where the host's / is (--host-root) and hands the filesystem the path is checked and created on.
  let host: VolumeHost;
  return {
    name: hostPathPluginName,
    init(h) {
      host = h;
    },
    canSupport: (spec) => Boolean(spec.volume?.hostPath ?? spec.persistentVolume?.spec?.hostPath),
    requiresRemount: () => false,
    newMounter(spec): Mounter {
      const src = source(spec);
      return {
        getPath: () => src.path,
        getAttributes: () => ({ readOnly: spec.readOnly, managed: false, selinuxRelabel: false }),
        async setUp() {
          validatePathNoBacksteps(src.path);
          if (!src.type) return;
          // A relative path (the API server admits one) is taken from /, kubelet's working directory.
          const path = resolve('/', src.path);
          // In a container, the host's files are under --host-root; messages name the host path.
          const root = host.getHostRoot?.() ?? '/';
          const fs = host.getFs().ops;
          const probe = host.getStatProbe();
          const stat: FollowingStat = (p) => probe.stat(p, { follow: true });
          if (root === '/') return checkHostPathType(path, src.type, fs, stat);
          // resolveInRoot walks the path with lstat: only once its filesystem has answered.
          await statHostPath(join(root, path), stat);
          const onHost = await resolveInRoot(root, path, fs);
          try {
            await checkHostPathType(onHost, src.type, fs, stat);
          } catch (err) {
            if (err instanceof VolumeError)
              throw new VolumeError(err.reason, err.message.replaceAll(onHost, path));
            throw err;
          }
        },
        setUpAt: () => Promise.reject(new Error('SetUpAt() does not make sense for host paths')),
      };
    },
    newUnmounter: (name) => ({
      getPath: () => name,
      tearDown: async () => {},
      tearDownAt: () => Promise.reject(new Error('TearDownAt() does not make sense for host paths')),
    }),
    constructVolumeSpec: (name) => ({ volume: { name, hostPath: { path: name } }, readOnly: false }),
  };
}
