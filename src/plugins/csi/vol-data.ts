// kubelet's CSI on-disk layout and its vol_data.json files (csi_util.go
// saveVolumeData/loadVolumeData, csi_attacher.go MakeDeviceMountPath), read
// and written through the volume host's filesystem (VolumeHost.getFs().ops),
// so that `podvol plan` runs the same code on its recording one.
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { errnoCode, errorMessage } from '../../errno.ts';
import { type FsOps, O_CREAT, O_TRUNC, O_WRONLY } from '../../volumehost/fs.ts';
import { VolumeError } from '../../volumehost/volume.ts';
import { goEncodeMap } from './gojson.ts';

export const csiPluginName = 'kubernetes.io/csi';
export const volDataFileName = 'vol_data.json';

/** The keys kubelet writes (volDataKey in csi_plugin.go). */
export const volDataKey = {
  specVolID: 'specVolID',
  volHandle: 'volumeHandle',
  driverName: 'driverName',
  nodeName: 'nodeName',
  attachmentID: 'attachmentID',
  volumeLifecycleMode: 'volumeLifecycleMode',
  /** Only when the volume was mounted with `-o context=<this label>`. */
  seLinuxMountContext: 'seLinuxMountContext',
} as const;

export const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/** kubernetes.io/csi/<driver>^<handle>: the unique volume name, and the name in node.status.volumesInUse. */
export const uniqueVolumeName = (driver: string, handle: string) => `${csiPluginName}/${driver}^${handle}`;

/** The VolumeAttachment's name: csi-<sha256(handle + driver + node)>. */
export const attachmentName = (handle: string, driver: string, node: string) =>
  `csi-${sha256Hex(handle + driver + node)}`;

/** An inline ephemeral volume's handle: csi-<sha256(podUID + volumeName)>. */
export const ephemeralVolumeHandle = (podUID: string, volumeName: string) =>
  `csi-${sha256Hex(podUID + volumeName)}`;

/** <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>: globalmount and its vol_data.json live here. */
export const stagingDataDir = (pluginDir: string, driver: string, handle: string) =>
  join(pluginDir, driver, sha256Hex(handle));
export const stagingPath = (pluginDir: string, driver: string, handle: string) =>
  join(stagingDataDir(pluginDir, driver, handle), 'globalmount');

/**
 * Driver names are path components of the staging path: only what the
 * CSIDriver object name allows (a DNS-1123 subdomain, at most 63 characters
 * for CSI) can be one.
 */
const driverNameRE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

export function checkDriverName(name: string): void {
  if (!driverNameRE.test(name) || name.includes('..')) {
    throw new VolumeError(
      'InvalidDriverName',
      `CSI driver name ${JSON.stringify(name)} is not a valid driver name`,
    );
  }
}

/** A volume directory name (PV name or pod volume name): one path component, never . or .. */
export function checkSpecName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new VolumeError('InvalidPath', `volume name ${JSON.stringify(name)} cannot be a directory name`);
  }
}

/** Written atomically so a crash never leaves a half file that blocks teardown. */
export async function saveVolumeData(fs: FsOps, dir: string, data: Record<string, string>): Promise<void> {
  const file = join(dir, volDataFileName);
  // kubelet's os.Create: 0666 less the umask, 0644 under kubelet's (and podvol's) 022.
  const fh = await fs.open(`${file}.tmp`, O_WRONLY | O_CREAT | O_TRUNC, 0o644);
  try {
    await fh.writeFile(goEncodeMap(data));
  } finally {
    await fh.close();
  }
  await fs.rename(`${file}.tmp`, file);
}

export async function loadVolumeData(fs: FsOps, dir: string): Promise<Record<string, string> | undefined> {
  let text: string;
  try {
    text = (await fs.readFile(join(dir, volDataFileName))).toString('utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const data: unknown = JSON.parse(text);
    if (!data || typeof data !== 'object' || Array.isArray(data)) throw new Error('not an object');
    return Object.fromEntries(
      Object.entries(data).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
  } catch (err) {
    throw new VolumeError(
      'CorruptVolumeData',
      `failed to parse ${join(dir, volDataFileName)}: ${errorMessage(err)}`,
    );
  }
}

/** os.MkdirAll through the host's filesystem: `path` and its missing parents, each with `mode` (less the umask). */
export async function mkdirAll(fs: FsOps, path: string, mode: number): Promise<void> {
  try {
    await fs.mkdir(path, mode);
    return;
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') {
      if ((await fs.stat(path)).isDirectory()) return;
      throw err;
    }
    if (errnoCode(err) !== 'ENOENT' || dirname(path) === path) throw err;
  }
  await mkdirAll(fs, dirname(path), mode);
  await fs.mkdir(path, mode).catch((err: unknown) => {
    if (errnoCode(err) !== 'EEXIST') throw err;
  });
}

/**
 * kubelet's removeMountDir: the mount directory (if nothing is mounted there),
 * its vol_data.json, the directory. rmdir itself is the mount check: the
 * kernel refuses to remove a mount point (EBUSY), with no window between a
 * look at the mount table and the removal, and never removes contents.
 */
export async function removeMountDir(fs: FsOps, dir: string, mountDir: string): Promise<void> {
  await fs.rmdir(mountDir).catch((err: unknown) => {
    if (errnoCode(err) === 'EBUSY') {
      throw new VolumeError('StillMounted', `${mountDir} is still mounted; not removing it`);
    }
    if (errnoCode(err) !== 'ENOENT') throw err;
  });
  await fs.unlink(join(dir, volDataFileName)).catch((err: unknown) => {
    if (errnoCode(err) !== 'ENOENT') throw err;
  });
  await fs.rmdir(dir).catch((err: unknown) => {
    if (errnoCode(err) !== 'ENOENT') throw err;
  });
}
