// --pod-manifest-path: the static pod source. Reads every manifest file in one
// directory (not recursive), or one manifest file as kubelet accepts too, and
// keeps pods() in step with it: fs.watch events
// trigger a rescan within debounceMs, and a periodic rescan catches whatever
// inotify misses (network filesystems, a directory that appears later or is
// replaced). A rescan only re-parses files whose stat changed.
//
// Like kubelet (pkg/kubelet/config/file.go: Glob "[^.]*"), names starting
// with '.' are ignored, so "write to .name.tmp, then rename" is the atomic way
// to update a manifest. Beyond kubelet, editor backups ("name~") and Emacs
// autosaves ("#name#") are ignored too: they would otherwise define the same
// pod a second time.
import { constants, type FSWatcher, watch } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { type Clock, systemClock, type Timer } from '../../clock.ts';
import { errnoCode, errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import type { SourceReason } from '../../reasons.ts';
import { rerunWhileAsked } from '../rerun.ts';
import { MAX_MANIFEST_BYTES, type ParsedManifest, parseManifestFile } from './manifest.ts';
import type { PodSource, SourceError } from './types.ts';

export interface StaticPodSourceOptions {
  /** Directory holding the manifests, or a single manifest file; may not exist yet. */
  dir: string;
  nodeName: string;
  logger: Logger;
  /** Delay between a filesystem event and the rescan it triggers (coalesces bursts). Default 100 ms. */
  debounceMs?: number;
  /** Safety-net rescan period. Default 1000 ms: a change shows up within a second even without inotify. */
  resyncMs?: number;
  /**
   * Before the first sync, a manifest that has errors is read again after this long before its
   * pods are taken as absent: it may be a file a writer is half-way through. Default 1000 ms.
   */
  firstSyncGraceMs?: number;
  /** Time and timers (debounce, resync); default the system's. */
  clock?: Clock;
  /** Refuses a pod that is valid but may not run here: the SourceError's reason and message. */
  refuse?: (pod: V1Pod) => { reason: SourceReason; message: string } | undefined;
  /** The filesystem calls the source makes; default node:fs/promises (tests interpose on them). */
  fs?: ManifestFs;
}

export type ManifestFs = Pick<typeof fsPromises, 'stat' | 'open' | 'readdir'>;

// O_NONBLOCK: a FIFO (or a symlink to one) swapped in after the stat opens at once instead of
// waiting for a writer; O_NOCTTY: a terminal device opened so never becomes podvol's controlling
// terminal. Symlinks are followed, as kubelet follows them (a manifest directory may be a
// configMap-style tree of links); what is read is checked on the opened descriptor.
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Whether a directory entry is skipped rather than read as a manifest. */
export function isIgnoredManifestName(name: string): boolean {
  return name.startsWith('.') || name.endsWith('~') || (name.startsWith('#') && name.endsWith('#'));
}

interface CachedFile {
  /** dev:ino:size:mtime:ctime of the content that was parsed. */
  key: string;
  result: ParsedManifest;
}

type StatLike = { dev: bigint; ino: bigint; size: bigint; mtimeNs: bigint; ctimeNs: bigint };

function statKey(s: StatLike): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
}

function errText(err: unknown): string {
  const code = errnoCode(err);
  return code ? `${code}: ${errorMessage(err)}` : errorMessage(err);
}

type Opened = { st: StatLike; buf: Buffer | 'too-large' } | { notAFile: true };

// The file is checked and read through one descriptor, so what was found to be a regular file
// of an acceptable size is what is read, whatever is renamed over the path meanwhile. It reads
// at most limit+1 bytes so a file growing while we read can not make us buffer more than the cap.
async function readCapped(fs: ManifestFs, path: string, limit: number): Promise<Opened> {
  const fh = await fs.open(path, OPEN_FLAGS);
  try {
    const st = await fh.stat({ bigint: true });
    if (!st.isFile()) return { notAFile: true };
    if (st.size > BigInt(limit)) return { st, buf: 'too-large' };
    const buf = Buffer.alloc(limit + 1);
    let n = 0;
    while (n < buf.length) {
      const { bytesRead } = await fh.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
    }
    return { st, buf: n > limit ? 'too-large' : buf.subarray(0, n) };
  } finally {
    await fh.close();
  }
}

function errorKey(e: SourceError): string {
  return JSON.stringify([e.file, e.document, e.reason, e.message, e.furtherErrors]);
}

/**
 * One error per file: its first, counting the others in furtherErrors. A file of 100,000
 * broken documents is one log line and one /status entry, not 100,000 (issue 21 finding 6).
 */
export function errorsPerFile(errors: readonly SourceError[]): SourceError[] {
  const first = new Map<string | undefined, SourceError>();
  for (const e of errors) {
    const seen = first.get(e.file);
    if (seen) seen.furtherErrors = (seen.furtherErrors ?? 0) + 1;
    else first.set(e.file, { ...e });
  }
  return [...first.values()];
}

export function createStaticPodSource(opts: StaticPodSourceOptions): PodSource {
  const { dir, nodeName, logger } = opts;
  const fs = opts.fs ?? fsPromises;
  const debounceMs = opts.debounceMs ?? 100;
  const resyncMs = opts.resyncMs ?? 1000;
  const firstSyncGraceMs = opts.firstSyncGraceMs ?? 1000;
  const clock = opts.clock ?? systemClock();
  const log = logger.child({ component: 'static-pods', dir });

  const cache = new Map<string, CachedFile>();
  /** Per manifest name: the pods it defined when it last read without an error. */
  const lastClean = new Map<string, V1Pod[]>();
  /** Manifest names whose errors currently keep pods they no longer define (logged once). */
  const keeping = new Set<string>();
  let firstScanMs: number | undefined;
  const listeners = new Set<() => void>();
  const warnedEntries = new Set<string>();
  let snapshot: { pods: V1Pod[]; errors: SourceError[]; fingerprint: string } = {
    pods: [],
    errors: [],
    fingerprint: '',
  };
  let synced = false;
  let lastSyncMs: number | undefined;
  let stopped = true;
  let dirMissingLogged = false;
  let watcher: FSWatcher | undefined;
  let watchedIno: bigint | undefined;
  /** The directory the manifests are read from and watched: dir, or a single file's parent. */
  let base = dir;
  let debounceTimer: Timer | undefined;
  let resyncTimer: Timer | undefined;
  /** Why the last scan could not read the manifest path, while it cannot (for /readyz). */
  let problem: string | undefined;

  function closeWatcher(): void {
    watcher?.close();
    watcher = undefined;
    watchedIno = undefined;
  }

  function ensureWatcher(dirIno: bigint | undefined): void {
    if (dirIno === undefined) {
      closeWatcher();
      return;
    }
    // A directory deleted and re-created is a new inode: the old watch is dead.
    if (watcher && watchedIno === dirIno) return;
    closeWatcher();
    try {
      const w = watch(base, { persistent: false }, () => schedule(debounceMs));
      w.on('error', (err) => {
        log.debug(
          { err: errText(err) },
          'manifest directory watch failed; relying on periodic rescan until it is re-established',
        );
        if (watcher === w) closeWatcher();
        schedule(debounceMs);
      });
      watcher = w;
      watchedIno = dirIno;
    } catch (err) {
      log.debug({ err: errText(err) }, 'cannot watch manifest directory; relying on periodic rescan');
    }
  }

  function schedule(delay: number): void {
    if (stopped || debounceTimer) return;
    debounceTimer = clock.after(
      delay,
      () => {
        debounceTimer = undefined;
        void rescan();
      },
      { unref: true },
    );
  }

  // A change seen while a scan runs gets a scan of its own after it.
  const rescans = rerunWhileAsked(
    async () => {
      try {
        await scanOnce();
      } catch (err) {
        // scanOnce handles expected failures itself; this is a bug guard so the loop never dies,
        // and the failure is shown (once in the log, in /status and /readyz) with the pods kept.
        const message = `scanning the manifest path failed: ${errText(err)}`;
        if (message !== problem)
          log.error({ err: errText(err) }, 'unexpected failure while scanning static pod manifests');
        problem = message;
        const others = snapshot.errors.filter((e) => e.reason !== 'ScanFailed');
        publish(snapshot.pods, [{ source: 'file', file: dir, reason: 'ScanFailed', message }, ...others]);
      }
    },
    { stopped: () => stopped },
  );
  const rescan = () => rescans.run();

  async function readDir(): Promise<
    { base: string; names: string[]; ino?: bigint; single?: boolean } | { error: SourceError }
  > {
    try {
      const st = await fs.stat(dir, { bigint: true });
      if (st.isFile()) {
        // One manifest file: watch its directory, so a rename over it (an atomic update) is seen too.
        const parent = await fs.stat(dirname(dir), { bigint: true });
        return { base: dirname(dir), names: [basename(dir)], ino: parent.ino, single: true };
      }
      if (!st.isDirectory()) {
        return {
          error: {
            source: 'file',
            file: dir,
            reason: 'ReadError',
            message: 'manifest path is neither a directory nor a regular file',
          },
        };
      }
      const names = (await fs.readdir(dir)).sort();
      return { base: dir, names, ino: st.ino };
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { base: dir, names: [] };
      return {
        error: {
          source: 'file',
          file: dir,
          reason: 'ReadError',
          message: `cannot read manifest directory: ${errText(err)}`,
        },
      };
    }
  }

  async function readManifest(name: string): Promise<ParsedManifest | 'skip'> {
    const path = join(base, name);
    const fail = (reason: SourceReason, message: string): ParsedManifest => ({
      pods: [],
      errors: [{ source: 'file', file: path, reason, message }],
    });
    let st: StatLike & { isFile(): boolean; isDirectory(): boolean };
    try {
      st = await fs.stat(path, { bigint: true });
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return 'skip'; // removed since readdir, or a dangling symlink
      return fail('ReadError', `cannot stat manifest: ${errText(err)}`);
    }
    const notAFile = (directory: boolean): 'skip' => {
      if (!warnedEntries.has(name)) {
        warnedEntries.add(name);
        log.warn(
          { file: path },
          directory
            ? 'not recursing into sub-directory of the manifest path'
            : 'ignoring manifest path entry that is not a regular file',
        );
      }
      return 'skip';
    };
    if (!st.isFile()) return notAFile(st.isDirectory());
    const cached = cache.get(name);
    if (cached?.key === statKey(st)) {
      warnedEntries.delete(name);
      return cached.result;
    }
    let result: ParsedManifest;
    // The key of what was read: the opened file's, which may be newer than the stat above.
    let key = statKey(st);
    if (st.size > BigInt(MAX_MANIFEST_BYTES)) {
      result = fail('FileTooLarge', `manifest is ${st.size} bytes, the limit is ${MAX_MANIFEST_BYTES}`);
    } else {
      try {
        const read = await readCapped(fs, path, MAX_MANIFEST_BYTES);
        if ('notAFile' in read) return notAFile(false); // replaced since the stat
        key = statKey(read.st);
        result =
          read.buf === 'too-large'
            ? fail('FileTooLarge', `manifest is larger than the limit of ${MAX_MANIFEST_BYTES} bytes`)
            : parseManifestFile(read.buf.toString('utf8'), path, nodeName);
      } catch (err) {
        if (errnoCode(err) === 'ENOENT') return 'skip';
        result = fail('ReadError', `cannot read manifest: ${errText(err)}`);
      }
    }
    warnedEntries.delete(name);
    // Changed while we read it (a writer mid-way)? Use what we have and look again soon.
    const after = await fs.stat(path, { bigint: true }).catch(() => undefined);
    if (!after || statKey(after) !== key) schedule(debounceMs);
    else cache.set(name, { key, result });
    return result;
  }

  async function scanOnce(): Promise<void> {
    const listing = await readDir();
    if ('error' in listing) {
      // Keep the last known pods: an unreadable directory says nothing about them.
      ensureWatcher(undefined);
      problem = listing.error.message;
      publish(snapshot.pods, [listing.error]);
      return;
    }
    if (listing.ino === undefined) {
      if (!dirMissingLogged) log.warn({}, 'manifest directory does not exist yet; waiting for it to appear');
      dirMissingLogged = true;
    } else {
      dirMissingLogged = false;
    }
    if (listing.base !== base) {
      closeWatcher();
      cache.clear();
      base = listing.base;
    }
    ensureWatcher(listing.ino);

    // A single file named on purpose is read whatever its name, as kubelet does.
    const names = listing.single ? listing.names : listing.names.filter((n) => !isIgnoredManifestName(n));
    const present = new Set(names);
    for (const name of cache.keys()) if (!present.has(name)) cache.delete(name);
    for (const name of lastClean.keys()) {
      if (present.has(name)) continue;
      lastClean.delete(name);
      keeping.delete(name);
    }
    const pods: V1Pod[] = [];
    const errors: SourceError[] = [];
    const byUID = new Map<string, string>();
    const byName = new Map<string, string>();
    let doubtful = false;
    for (const name of names) {
      const result = await readManifest(name);
      if (stopped) return;
      if (result === 'skip') continue;
      // One by one: a spread of a file's errors into push() overflowed the stack at ~120,000.
      for (const e of result.errors) errors.push(e);
      if (result.errors.length > 0 || result.pods.length === 0) doubtful = true;
      const file = join(base, name);
      for (const pod of podsOf(name, file, result)) {
        const uid = pod.metadata?.uid ?? '';
        const ns = pod.metadata?.namespace ?? '';
        const podName = pod.metadata?.name ?? '';
        const where = { source: 'file', file, namespace: ns, name: podName };
        const uidOwner = byUID.get(uid);
        const nameOwner = byName.get(`${ns}/${podName}`);
        if (uidOwner !== undefined) {
          errors.push({
            ...where,
            reason: 'DuplicateUID',
            message: `pod UID ${uid} is already defined in ${uidOwner}`,
          });
        } else if (nameOwner !== undefined) {
          errors.push({
            ...where,
            reason: 'DuplicatePod',
            message: `pod ${ns}/${podName} is already defined in ${nameOwner}`,
          });
        } else {
          byUID.set(uid, file);
          byName.set(`${ns}/${podName}`, file);
          const refused = opts.refuse?.(pod);
          if (refused) errors.push({ ...where, ...refused });
          else pods.push(pod);
        }
      }
    }
    problem = undefined;
    publish(pods, errorsPerFile(errors));
    const now = clock.now();
    firstScanMs ??= now;
    lastSyncMs = now;
    // A manifest caught between a writer's truncate and its write reads as empty or broken, and
    // pods a first sync does not list are torn down (their volumes found on disk are orphans):
    // so before the first sync, such a file is read again after the grace first.
    const waited = now - firstScanMs;
    if (!synced && doubtful && waited < firstSyncGraceMs) schedule(firstSyncGraceMs - waited);
    else synced = true;
  }

  /**
   * A manifest's pods. While it has errors (an edit gone wrong, a writer half-way through), the
   * pods it last defined without errors stay too, until it reads cleanly or is removed: kubelet
   * keeps a static pod whose file stops parsing on a change event as well (and drops it at its
   * next full listing, which podvol does not, since that would tear its volumes down).
   */
  function podsOf(name: string, file: string, result: ParsedManifest): V1Pod[] {
    if (result.errors.length === 0) {
      lastClean.set(name, result.pods);
      keeping.delete(name);
      return result.pods;
    }
    const now = new Set(result.pods.map((p) => p.metadata?.uid));
    const kept = (lastClean.get(name) ?? []).filter((p) => !now.has(p.metadata?.uid));
    if (kept.length === 0) keeping.delete(name);
    else if (!keeping.has(name)) {
      keeping.add(name);
      log.warn(
        { file, pods: kept.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`) },
        'manifest has errors: keeping the pods it last defined until it reads cleanly or is removed',
      );
    }
    return result.pods.concat(kept);
  }

  function publish(pods: V1Pod[], errors: SourceError[]): void {
    const fingerprint = JSON.stringify([pods, errors]);
    if (fingerprint === snapshot.fingerprint) return;
    logDiff(snapshot, { pods, errors });
    snapshot = { pods, errors, fingerprint };
    for (const l of [...listeners]) {
      try {
        l();
      } catch (err) {
        log.error({ err: errText(err) }, 'static pod source listener threw');
      }
    }
  }

  // Log what changed, once: file, pod and reason, never document content.
  function logDiff(
    prev: { pods: V1Pod[]; errors: SourceError[] },
    next: { pods: V1Pod[]; errors: SourceError[] },
  ): void {
    const before = new Map(prev.pods.map((p) => [p.metadata?.uid, JSON.stringify(p)]));
    const after = new Set(next.pods.map((p) => p.metadata?.uid));
    for (const p of next.pods) {
      const m = p.metadata;
      const fields = { uid: m?.uid, pod: `${m?.namespace}/${m?.name}` };
      const old = before.get(m?.uid);
      if (old === undefined) log.info(fields, 'static pod added');
      else if (old !== JSON.stringify(p)) log.info(fields, 'static pod changed');
    }
    for (const p of prev.pods) {
      if (!after.has(p.metadata?.uid)) {
        log.info(
          { uid: p.metadata?.uid, pod: `${p.metadata?.namespace}/${p.metadata?.name}` },
          'static pod removed',
        );
      }
    }
    const oldErrors = new Set(prev.errors.map(errorKey));
    const newErrors = new Set(next.errors.map(errorKey));
    for (const e of next.errors) {
      if (oldErrors.has(errorKey(e))) continue;
      const pod = e.name !== undefined ? `${e.namespace ?? 'default'}/${e.name}` : undefined;
      log.error(
        { file: e.file, document: e.document, pod, reason: e.reason, furtherErrors: e.furtherErrors },
        `static pod manifest rejected: ${e.message}`,
      );
    }
    for (const e of prev.errors) {
      if (!newErrors.has(errorKey(e)))
        log.info(
          { file: e.file, document: e.document, reason: e.reason },
          'static pod manifest error resolved',
        );
    }
  }

  return {
    name: 'file',
    async start() {
      if (!stopped) return;
      stopped = false;
      await rescan();
      if (stopped) return;
      resyncTimer = clock.every(resyncMs, () => schedule(0), { unref: true });
    },
    async stop() {
      stopped = true;
      debounceTimer?.cancel();
      debounceTimer = undefined;
      resyncTimer?.cancel();
      resyncTimer = undefined;
      closeWatcher();
      await rescans.running();
    },
    hasSynced: () => synced,
    problem: () => problem,
    stats: () => ({ lastSyncSeconds: lastSyncMs === undefined ? undefined : lastSyncMs / 1000 }),
    pods: () => [...snapshot.pods],
    errors: () => [...snapshot.errors],
    onChange(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}
