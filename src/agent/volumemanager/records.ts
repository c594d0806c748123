// podvol's per-volume record on disk: what reconstruction after a restart
// needs and the directory layout alone cannot tell (the full volume spec,
// the pod's namespace and name). Kept outside the pod directory
// (<root>/podvol/pods/<uid>), so nothing podvol writes lives where containers
// see it; orphan cleanup removes a pod's records with its pod directory.
import { basename, dirname, join } from 'node:path';
import type { V1PersistentVolume, V1Volume } from '@kubernetes/client-node';
import { fieldOf } from '../../errno.ts';
import { escapeQualifiedName, podVolumeRecordsDir } from '../../volumehost/paths.ts';
import { relativeBeneath, type SafeFs } from '../../volumehost/safe-fs.ts';
import { parseOwnDocument } from '../own-document.ts';

export interface VolumeRecord {
  version: 1;
  podUID: string;
  podNamespace: string;
  podName: string;
  volumeName: string;
  pluginName: string;
  /** The pod's volume entry; it names secrets and configMaps but holds no data. */
  volume: V1Volume;
  readOnly: boolean;
  /** The volume directory's name when it is not volumeName (a claim's PersistentVolume name). */
  innerName?: string;
  /** The PersistentVolume a claim resolved to (no secrets: PVs only name them). */
  persistentVolume?: V1PersistentVolume;
  /**
   * RFC 3339: when the volume was first desired for this pod, kept when the
   * record is written again, so `podvol status`'s AGE survives a restart.
   * Absent in records written before it was kept: AGE then counts from when
   * this process first desired the volume, and the next SetUp writes it.
   */
  created?: string;
}

const recordPath = (root: string, podUID: string, pluginName: string, volumeName: string) =>
  join(podVolumeRecordsDir(root, podUID), escapeQualifiedName(pluginName), `${volumeName}.json`);

// Written and read on the filesystem the host hands plugins, so `podvol plan` shows the record the daemon
// writes and reconstruction reads what was written there.
export async function writeRecord(fs: SafeFs, root: string, r: VolumeRecord): Promise<void> {
  const path = recordPath(root, r.podUID, r.pluginName, r.volumeName);
  const name = basename(path);
  const dir = await fs.openMkdirAll(root, relativeBeneath(root, dirname(path)), 0o750);
  try {
    await dir.writeFile(`${name}.tmp`, JSON.stringify(r), 0o600);
    await fs.ops.rename(dir.child(`${name}.tmp`), dir.child(name));
  } finally {
    await dir.close();
  }
}

export async function readRecord(
  fs: SafeFs,
  root: string,
  podUID: string,
  pluginName: string,
  volumeName: string,
): Promise<VolumeRecord | undefined> {
  try {
    return parseOwnDocument<VolumeRecord>(
      (await fs.ops.readFile(recordPath(root, podUID, pluginName, volumeName))).toString('utf8'),
      (d) => fieldOf(d, 'version') === 1 && fieldOf(fieldOf(d, 'volume'), 'name') === volumeName,
    );
  } catch {
    return undefined;
  }
}

export async function removeRecord(
  fs: SafeFs,
  root: string,
  podUID: string,
  pluginName: string,
  volumeName: string,
): Promise<void> {
  await fs.removeAllBeneath(root, relativeBeneath(root, recordPath(root, podUID, pluginName, volumeName)));
}

/** The record of the pod's volume whose directory is `innerName` (a claim's volume lives under the PV's name). */
export async function findRecordByInnerName(
  fs: SafeFs,
  root: string,
  podUID: string,
  pluginName: string,
  innerName: string,
): Promise<VolumeRecord | undefined> {
  const direct = await readRecord(fs, root, podUID, pluginName, innerName);
  if (direct && (direct.innerName ?? direct.volumeName) === innerName) return direct;
  let names: string[];
  try {
    names = await fs.ops.readdir(join(podVolumeRecordsDir(root, podUID), escapeQualifiedName(pluginName)));
  } catch {
    return undefined;
  }
  for (const n of names) {
    if (!n.endsWith('.json')) continue;
    const r = await readRecord(fs, root, podUID, pluginName, n.slice(0, -'.json'.length));
    if (r && r.innerName === innerName) return r;
  }
  return undefined;
}

/**
 * A pod directory podvol created or adopted has a records directory
 * (<root>/podvol/pods/<uid>), made before the pod directory itself. Only such
 * pod directories are ever reconstructed, torn down or removed: a directory
 * someone else put under <root>/pods is left alone.
 */
export async function markPodOwned(fs: SafeFs, root: string, podUID: string): Promise<void> {
  await fs.mkdirAllBeneath(root, relativeBeneath(root, podVolumeRecordsDir(root, podUID)), 0o750);
}

export async function podOwned(fs: SafeFs, root: string, podUID: string): Promise<boolean> {
  try {
    return (await fs.ops.lstat(podVolumeRecordsDir(root, podUID))).isDirectory();
  } catch {
    return false;
  }
}
