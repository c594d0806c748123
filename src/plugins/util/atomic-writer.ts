// kubelet's AtomicWriter (k/k pkg/volume/util/atomic_writer.go), step by step.
//
// The payload lives in a hidden timestamped directory `..<UTC time>.<random>`;
// `..data` is a relative symlink to it and every user-visible top-level name is
// a relative symlink `<name> -> ..data/<name>`. An update writes a complete new
// timestamped directory and swaps `..data` with one rename(2), so a reader that
// goes through `..data` sees either the whole old set or the whole new set.
// Names starting with `..` are reserved. There is no internal locking: callers
// serialize writes per volume (kubelet's per-(volume,pod) operation key).
import { randomBytes } from 'node:crypto';
import { join, posix } from 'node:path';
import { errnoCode, errorMessage } from '../../errno.ts';
import { type FsOps, O_CREAT, O_NOFOLLOW, O_TRUNC, O_WRONLY, pathsBelow } from '../../volumehost/fs.ts';
import { createSafeFs, SafeDir } from '../../volumehost/safe-fs.ts';

export interface FileProjection {
  data: Uint8Array | string;
  /** Permission bits; like Go's os.FileMode conversion only 0o777 is honoured. */
  mode: number;
  /** Owner to lchown the file to (group left unchanged). */
  fsUser?: number;
}

export type Payload = Map<string, FileProjection> | Record<string, FileProjection>;

export interface WriteOptions {
  /** Prefix for error messages, kubelet uses `pod <ns>/<name> volume <vol>`. */
  logContext?: string;
  /** Called with the new timestamped dir's name after the files are written and before they are published. */
  setPerms?: (tsDirName: string) => Promise<void>;
  /** Clock for the timestamped dir name (tests). */
  now?: () => Date;
}

const MAX_FILE_NAME_LENGTH = 255;
const MAX_PATH_LENGTH = 4096;
export const DATA_DIR_NAME = '..data';
export const NEW_DATA_DIR_NAME = '..data_tmp';

/** validatePath with kubelet's messages; lengths count bytes as Go's len() does. */
export function validatePayloadPath(p: string): void {
  if (p === '') throw new Error('invalid path: must not be empty: ""');
  if (p.startsWith('/')) throw new Error(`invalid path: must be relative path: ${p}`);
  if (Buffer.byteLength(p) > MAX_PATH_LENGTH) {
    throw new Error(`invalid path: must be less than or equal to ${MAX_PATH_LENGTH} characters`);
  }
  const items = p.split('/');
  for (const item of items) {
    if (item === '..') throw new Error(`invalid path: must not contain '..': ${p}`);
    if (Buffer.byteLength(item) > MAX_FILE_NAME_LENGTH) {
      throw new Error(
        `invalid path: filenames must be less than or equal to ${MAX_FILE_NAME_LENGTH} characters`,
      );
    }
  }
  const first = items[0] ?? '';
  if (first.startsWith('..') && first.length > 2) {
    throw new Error(`invalid path: must not start with '..': ${p}`);
  }
}

/** Go's filepath.Clean for the relative paths payloads and volume items carry. */
export function cleanPath(p: string): string {
  if (p === '') return '.';
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

interface CleanFile {
  data: Buffer;
  mode: number;
  fsUser?: number;
}

function validatePayload(payload: Payload): Map<string, CleanFile> {
  const entries = payload instanceof Map ? [...payload.entries()] : Object.entries(payload);
  const clean = new Map<string, CleanFile>();
  for (const [p, f] of entries) {
    validatePayloadPath(p);
    const data = typeof f.data === 'string' ? Buffer.from(f.data, 'utf8') : Buffer.from(f.data);
    clean.set(cleanPath(p), { data, mode: f.mode & 0o777, fsUser: f.fsUser });
  }
  return clean;
}

export class AtomicWriteError extends Error {
  /** The payload itself was refused (a bad path), as opposed to a failure writing it. */
  readonly invalidPayload: boolean;
  constructor(context: string, step: string, cause?: unknown, invalidPayload = false) {
    const detail = cause === undefined ? '' : `: ${errorMessage(cause)}`;
    super(`${context ? `${context}: ` : ''}${step}${detail}`, { cause });
    this.name = 'AtomicWriteError';
    this.invalidPayload = invalidPayload;
  }
}

async function readlinkOrEmpty(fs: FsOps, p: string): Promise<string> {
  try {
    return await fs.readlink(p);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return '';
    throw err;
  }
}

async function pathsToRemove(
  fs: FsOps,
  payload: Map<string, CleanFile>,
  oldTsPath: string,
): Promise<Set<string>> {
  const current = new Set((await pathsBelow(fs, oldTsPath)).map((e) => e.rel));
  // Keep every payload path and all its parents, so non-empty dirs are never candidates.
  const keep = new Set<string>();
  for (const file of payload.keys()) {
    for (let sub = file; sub !== '' && sub !== '.'; sub = posix.dirname(sub)) keep.add(sub);
  }
  return new Set([...current].filter((p) => !keep.has(p)));
}

async function shouldWriteFile(fs: FsOps, p: string, content: Buffer): Promise<boolean> {
  try {
    await fs.lstat(p);
  } catch (err) {
    // ENOTDIR too: a file in the old set became a directory in the new one.
    // (kubelet only treats ENOENT as "missing" and fails the write forever.)
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return true;
  }
  return !content.equals(await fs.readFile(p));
}

async function shouldWritePayload(
  fs: FsOps,
  payload: Map<string, CleanFile>,
  oldTsPath: string,
): Promise<boolean> {
  for (const [p, f] of payload) {
    if (await shouldWriteFile(fs, join(oldTsPath, p), f.data)) return true;
  }
  return false;
}

function pad(n: number): string {
  return String(n).padStart(2, '0');
}

// Go: os.MkdirTemp(target, now.UTC().Format("..2006_01_02_15_04_05.")), then chmod 0755.
async function newTimestampDir(fs: FsOps, targetDir: string, now: Date): Promise<string> {
  const prefix =
    `..${now.getUTCFullYear()}_${pad(now.getUTCMonth() + 1)}_${pad(now.getUTCDate())}_` +
    `${pad(now.getUTCHours())}_${pad(now.getUTCMinutes())}_${pad(now.getUTCSeconds())}.`;
  for (let attempt = 0; attempt < 10000; attempt++) {
    const dir = join(targetDir, prefix + randomBytes(4).readUInt32BE(0));
    try {
      await fs.mkdir(dir, 0o700);
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') continue;
      throw err;
    }
    // 0755 lets group and other traverse the tree whatever the umask.
    await fs.chmod(dir, 0o755);
    return dir;
  }
  throw new Error(`could not create a unique timestamped directory in ${targetDir}`);
}

/** os.MkdirAll(0777) inside the new timestamped directory, which we just made: nothing in it is foreign. */
async function mkdirParents(fs: FsOps, dir: string, rel: string): Promise<void> {
  const parts = rel.split('/').slice(0, -1);
  for (let i = 1; i <= parts.length; i++) {
    await fs.mkdir(join(dir, ...parts.slice(0, i)), 0o777).catch((err) => {
      if (errnoCode(err) !== 'EEXIST') throw err;
    });
  }
}

async function writePayloadToDir(fs: FsOps, payload: Map<string, CleanFile>, dir: string): Promise<void> {
  for (const [p, f] of payload) {
    const fullPath = join(dir, p);
    await mkdirParents(fs, dir, p);
    const fh = await fs.open(fullPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, f.mode);
    try {
      await fh.writeFile(f.data);
      // open(2) applied the umask; the requested mode must win.
      await fh.chmod(f.mode);
    } finally {
      await fh.close();
    }
    if (f.fsUser !== undefined) await fs.lchown(fullPath, f.fsUser, -1);
  }
}

async function createUserVisibleFiles(
  fs: FsOps,
  targetDir: string,
  payload: Map<string, CleanFile>,
): Promise<void> {
  for (const p of payload.keys()) {
    const [linkName = p] = p.split('/');
    try {
      await fs.readlink(join(targetDir, linkName));
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') continue;
      await fs.symlink(join(DATA_DIR_NAME, linkName), join(targetDir, linkName));
    }
  }
}

// Go's os.Remove: a file/symlink, or an empty directory.
async function removePath(fs: FsOps, p: string): Promise<void> {
  try {
    await fs.unlink(p);
  } catch (err) {
    if (errnoCode(err) === 'EISDIR' || errnoCode(err) === 'EPERM') await fs.rmdir(p);
    else throw err;
  }
}

async function removeUserVisiblePaths(fs: FsOps, targetDir: string, paths: Set<string>): Promise<void> {
  let lastErr: unknown;
  for (const p of paths) {
    // Only the top level holds user-visible links; deeper paths vanish with the old ts dir.
    if (p.includes('/')) continue;
    try {
      await removePath(fs, join(targetDir, p));
    } catch (err) {
      // Already gone is the desired state (kubelet would report an error here).
      if (errnoCode(err) !== 'ENOENT') lastErr = err;
    }
  }
  if (lastErr !== undefined) throw lastErr;
}

/**
 * Projects payload into targetDir atomically (AtomicWriter.Write). Returns
 * changed=false when the data on disk already matches; missing user-visible
 * links are recreated either way (k/k #121472). File modes alone never trigger
 * a rewrite, as in kubelet.
 */
export async function writeAtomically(
  target: SafeDir | { fs: FsOps; path: string },
  payload: Payload,
  opts: WriteOptions = {},
): Promise<{ changed: boolean }> {
  const ctx = opts.logContext ?? '';
  // An open SafeDir (the volume, opened without following symlinks) is worked in
  // through its /proc/self/fd path (and is the root of the removals below);
  // messages name the real path. A path with its fs is for tests.
  const root = target instanceof SafeDir ? target : target.path;
  const targetDir = target instanceof SafeDir ? target.procPath : target.path;
  const shownDir = target.path;
  const fs = target.fs;
  // Removals below the target, on its filesystem: the target is its root, so
  // no operation's held directories apply and a SafeFs of its own serves.
  const safe = createSafeFs(fs);
  try {
    await fs.stat(targetDir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') {
      throw new AtomicWriteError(ctx, `target directory ${shownDir} does not exist`, err);
    }
  }

  // (1) validate
  let clean: Map<string, CleanFile>;
  try {
    clean = validatePayload(payload);
  } catch (err) {
    throw new AtomicWriteError(ctx, 'invalid payload', err, true);
  }

  // (2) current timestamped dir
  const dataDirPath = join(targetDir, DATA_DIR_NAME);
  let oldTsDir: string;
  try {
    oldTsDir = await readlinkOrEmpty(fs, dataDirPath);
  } catch (err) {
    throw new AtomicWriteError(ctx, 'error reading link for data directory', err);
  }
  // We only ever write a bare sibling name; anything else must not be walked or deleted.
  if (oldTsDir !== '' && (oldTsDir.includes('/') || !oldTsDir.startsWith('..') || oldTsDir === '..')) {
    throw new AtomicWriteError(
      ctx,
      `${join(shownDir, DATA_DIR_NAME)} points to unexpected target ${JSON.stringify(oldTsDir)}`,
    );
  }
  const oldTsPath = join(targetDir, oldTsDir);

  let toRemove = new Set<string>();
  let shouldWrite = true;
  if (oldTsDir !== '') {
    try {
      // (3) what disappeared since the last write
      toRemove = await pathsToRemove(fs, clean, oldTsPath);
      // (4) did the data change
      const should = await shouldWritePayload(fs, clean, oldTsPath);
      if (!should && toRemove.size === 0) {
        shouldWrite = false;
        // Nothing to publish, and the current ts dir must survive step (12).
        oldTsDir = '';
      }
    } catch (err) {
      throw new AtomicWriteError(ctx, 'error determining whether payload should be written to disk', err);
    }
  }

  if (shouldWrite) {
    // (5) new timestamped dir
    let tsDir: string;
    try {
      tsDir = await newTimestampDir(fs, targetDir, opts.now?.() ?? new Date());
    } catch (err) {
      throw new AtomicWriteError(ctx, 'error creating new ts data directory', err);
    }
    const tsDirName = posix.basename(tsDir);
    const discardTsDir = () => safe.removeAllBeneath(root, tsDirName).catch(() => {});

    // (6) payload, (7) ownership hook
    try {
      await writePayloadToDir(fs, clean, tsDir);
    } catch (err) {
      await discardTsDir();
      throw new AtomicWriteError(
        ctx,
        `error writing payload to ts data directory ${join(shownDir, tsDirName)}`,
        err,
      );
    }
    if (opts.setPerms) {
      try {
        await opts.setPerms(tsDirName);
      } catch (err) {
        await discardTsDir();
        throw new AtomicWriteError(ctx, 'error applying ownership settings', err);
      }
    }

    // (8) ..data_tmp -> new ts dir. A leftover link from a crash between (8)
    // and (9) would make symlink(2) fail forever, so clear it first.
    const newDataDirPath = join(targetDir, NEW_DATA_DIR_NAME);
    try {
      await fs.unlink(newDataDirPath).catch((err) => {
        if (errnoCode(err) !== 'ENOENT') throw err;
      });
      await fs.symlink(tsDirName, newDataDirPath);
    } catch (err) {
      await discardTsDir();
      throw new AtomicWriteError(ctx, 'error creating symbolic link for atomic update', err);
    }

    // (9) the atomic swap
    try {
      await fs.rename(newDataDirPath, dataDirPath);
    } catch (err) {
      await fs.unlink(newDataDirPath).catch(() => {});
      await discardTsDir();
      throw new AtomicWriteError(
        ctx,
        `error renaming symbolic link for data directory ${join(shownDir, NEW_DATA_DIR_NAME)}`,
        err,
      );
    }
  }

  // (10) user-visible links, created only once their target exists
  try {
    await createUserVisibleFiles(fs, targetDir, clean);
  } catch (err) {
    throw new AtomicWriteError(ctx, `error creating visible symlinks in ${shownDir}`, err);
  }

  // (11) prune names that left the payload
  try {
    await removeUserVisiblePaths(fs, targetDir, toRemove);
  } catch (err) {
    throw new AtomicWriteError(ctx, 'error removing old visible symlinks', err);
  }

  // (12) the previous ts dir
  if (oldTsDir !== '') {
    try {
      await safe.removeAllBeneath(root, oldTsDir);
    } catch (err) {
      throw new AtomicWriteError(ctx, `error removing old data directory ${oldTsDir}`, err);
    }
  }
  return { changed: shouldWrite };
}
