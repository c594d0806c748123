// The root directory's mark: podvol tears down whatever pod directories it
// finds under its root, so it must never start on a directory that is not its
// own (another agent's, kubelet's /var/lib/kubelet) or that belongs to another
// node name (a short --node-name where the pods are bound to the FQDN). The
// mark, <root>/podvol/root-dir.json, records the node name the directory serves.
import { join } from 'node:path';
import { errnoCode, fieldOf } from '../errno.ts';
import type { Logger } from '../logger.ts';
import { type FsOps, mkdirAllTrusted } from '../volumehost/fs.ts';
import { podsDir, podVolumeRecordsDir } from '../volumehost/paths.ts';
import { relativeBeneath, type SafeFs } from '../volumehost/safe-fs.ts';
import { parseOwnDocument } from './own-document.ts';

export const ROOT_MARK_DIR = 'podvol';
export const ROOT_MARK_FILE = 'root-dir.json';

export interface RootMark {
  owner: 'podvol';
  version: 1;
  nodeName: string;
  /** RFC 3339: when podvol first marked (or adopted) the directory. */
  since: string;
}

/** Starting would risk someone else's data; the message says how to proceed. Exit code 1. */
export class RootDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RootDirError';
  }
}

async function readMark(fs: FsOps, rootDir: string): Promise<RootMark | undefined> {
  let text: string;
  try {
    text = (await fs.readFile(join(rootDir, ROOT_MARK_DIR, ROOT_MARK_FILE))).toString('utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  const m = parseOwnDocument<RootMark>(
    text,
    (d) => fieldOf(d, 'owner') === 'podvol' && typeof fieldOf(d, 'nodeName') === 'string',
  );
  if (!m) {
    throw new RootDirError(`${join(rootDir, ROOT_MARK_DIR, ROOT_MARK_FILE)} is not a podvol root mark`);
  }
  return m;
}

async function writeMark(fs: SafeFs, rootDir: string, nodeName: string): Promise<void> {
  const mark: RootMark = { owner: 'podvol', version: 1, nodeName, since: new Date().toISOString() };
  const dir = await fs.openMkdirAll(rootDir, ROOT_MARK_DIR, 0o750);
  try {
    await dir.writeFile(`${ROOT_MARK_FILE}.tmp`, `${JSON.stringify(mark)}\n`, 0o644);
    await fs.ops.rename(dir.child(`${ROOT_MARK_FILE}.tmp`), dir.child(ROOT_MARK_FILE));
  } finally {
    await dir.close();
  }
}

async function entries(fs: FsOps, dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
}

/** Every pod directory already there becomes podvol's (records.ts' ownership rule). */
async function adoptPodDirs(fs: SafeFs, rootDir: string): Promise<number> {
  const uids = await entries(fs.ops, podsDir(rootDir));
  for (const uid of uids) {
    await fs.mkdirAllBeneath(rootDir, relativeBeneath(rootDir, podVolumeRecordsDir(rootDir, uid)), 0o750);
  }
  return uids.length;
}

/**
 * Checks (and on first use writes) the root directory's mark before anything
 * else runs. Refuses, unless `adopt`: a directory with pod directories but no mark, and
 * a mark for another node name. A directory an earlier podvol left without a
 * mark (it has <root>/podvol) is simply marked.
 */
export async function claimRootDir(
  rootDir: string,
  nodeName: string,
  adopt: boolean,
  logger: Logger,
  fs: SafeFs,
): Promise<void> {
  await mkdirAllTrusted(fs.ops, rootDir, 0o750);
  const mark = await readMark(fs.ops, rootDir);
  const markPath = join(rootDir, ROOT_MARK_DIR, ROOT_MARK_FILE);
  if (mark) {
    if (mark.nodeName === nodeName) return;
    if (!adopt) {
      throw new RootDirError(
        `root directory ${rootDir} serves node "${mark.nodeName}" (${markPath}), not --node-name "${nodeName}": with the wrong node name every volume there would be torn down. Fix --node-name, or pass --adopt-root-dir to take the directory over for "${nodeName}".`,
      );
    }
    const n = await adoptPodDirs(fs, rootDir);
    await writeMark(fs, rootDir, nodeName);
    logger.warn(
      { rootDir, from: mark.nodeName, to: nodeName, podDirs: n },
      'adopted root directory for a new node name',
    );
    return;
  }
  const present = await entries(fs.ops, rootDir);
  // Only pod directories are ever torn down or removed: a root holding none
  // (a CSI node plugin's plugins/ and plugins_registry/ made before podvol's first
  // start, say) is as good as empty.
  const podDirs = await entries(fs.ops, podsDir(rootDir));
  if (podDirs.length === 0 || (present.includes(ROOT_MARK_DIR) && !adopt)) {
    // Fresh, or left by a podvol from before marks (only podvol makes <root>/podvol).
    await writeMark(fs, rootDir, nodeName);
    if (present.length > 0) logger.info({ rootDir }, 'marked a root directory an earlier podvol left');
    return;
  }
  if (!adopt) {
    throw new RootDirError(
      `root directory ${rootDir} holds pod directories (${podDirs.slice(0, 3).join(', ')}) and has no podvol mark (${markPath}): it may be another agent's, whose pod directories podvol would tear down. Point --root-dir at an empty or podvol directory, or pass --adopt-root-dir to take it over.`,
    );
  }
  const n = await adoptPodDirs(fs, rootDir);
  await writeMark(fs, rootDir, nodeName);
  logger.warn({ rootDir, podDirs: n }, 'adopted a root directory podvol did not create');
}
