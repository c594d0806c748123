// The parsed mount table, read once per change of it instead of once per
// question. Every mounter question (is this a mount point, what is mounted
// below, which mounts share this root) and the hung-filesystem probe used to
// read and parse /proc/self/mountinfo twice (consistentRead) each time: a few
// ms at 900 mounts, several times per operation.
//
// The kernel counts the changes of a mount namespace, and a poll(2) on an open
// mountinfo says whether the count moved since the previous poll on that file
// (native/mountwatch). With that, a table is shared until the next change:
//
// - Every list() first polls. A change since the previous poll bumps `#gen`,
//   which makes the cached table and any read in flight stale.
// - A read starts right after a poll (so it begins after every change that
//   poll reported) and is tagged with the generation of that moment. Once the
//   text is in, a poll again: no change during the read means the text is
//   one untorn snapshot (what consistentRead's second read is for) and still
//   current; a change means it is retried.
// - A caller gets the cached table or a read in flight only when they carry
//   the generation its own poll just confirmed: no change happened since
//   the read began, so the table is the one a read begun now would return.
//
// So a caller always gets a table at least as new as its call, as a read of its
// own would be, and between changes list() costs one poll and no read.
//
// What the count does not cover: changes of propagation type (make-shared,
// make-private; measured on 6.18) and text the kernel derives at read time (a
// bind source deleted later shows `//deleted` in its root). podvol decides
// nothing on propagation fields, and the derived text was never a guarantee of
// a read either (it may change right after any read).
//
// Without the addon (not built, or the path is not a /proc file, as in the
// simulated tests) every list() reads, as before.
import { readFile } from 'node:fs/promises';
import { loadAddon } from '../addon.ts';
import { MountInfoError } from './errors.ts';
import { consistentRead, PROC_MOUNTINFO, parseMountInfo, type TextReader } from './mountinfo.ts';
import type { MountInfo } from './types.ts';

/** Change notices for one mountinfo file. */
export interface MountChanges {
  /** Did the mount table change since the previous call (or since the watch began)? Answers now, without waiting. */
  changed(): boolean;
}

/** Starts watching `path`; undefined when it cannot be watched (the caller then reads every time). */
export type WatchMounts = (path: string) => MountChanges | undefined;

type Addon = { watch(path: string): unknown; changed(handle: unknown): boolean };

/**
 * The native watch, from the addon at `addon` (tests name a missing one);
 * undefined when the addon is missing or the file is not on /proc.
 */
export function nativeWatch(addon?: URL): WatchMounts {
  return (path) => {
    try {
      // Loaded at the first list(), not at import (loadAddon says why).
      const native = loadAddon<Addon>('mountwatch', addon);
      const handle = native.watch(path);
      return { changed: () => native.changed(handle) };
    } catch {
      return undefined;
    }
  };
}

export interface MountTableOptions {
  path?: string;
  reader?: TextReader;
  /** How changes are noticed; default the native addon. */
  watch?: WatchMounts;
}

/** Reads that may each meet a change before the table is given up on, as consistentRead. */
const MAX_ATTEMPTS = 10;

export class MountTable {
  readonly #path: string;
  readonly #reader: TextReader | undefined;
  readonly #watch: WatchMounts;
  /** Opened on the first list(), so constructing a mounter touches nothing; null: cannot watch. */
  #changes: MountChanges | null | undefined;
  /** Bumped whenever a poll reports a change: anything read under an older value may be stale. */
  #gen = 0;
  #cached: { gen: number; table: readonly MountInfo[] } | undefined;
  #inflight: { gen: number; table: Promise<readonly MountInfo[]> } | undefined;

  constructor(opts: MountTableOptions = {}) {
    this.#path = opts.path ?? PROC_MOUNTINFO;
    this.#reader = opts.reader;
    this.#watch = opts.watch ?? nativeWatch();
  }

  /** Whether changes are watched (false: every list() reads). */
  get watched(): boolean {
    return this.#open() !== null;
  }

  /**
   * The mount table as a read begun now would give it. Watched, callers share
   * one frozen table.
   */
  list(): Promise<readonly MountInfo[]> {
    const changes = this.#open();
    if (changes === null) return this.#readConsistent();
    return this.#current(changes, 1);
  }

  #open(): MountChanges | null {
    if (this.#changes === undefined) this.#changes = this.#watch(this.#path) ?? null;
    return this.#changes;
  }

  #poll(changes: MountChanges): void {
    if (changes.changed()) this.#gen++;
  }

  #current(changes: MountChanges, attempt: number): Promise<readonly MountInfo[]> {
    this.#poll(changes);
    if (this.#cached?.gen === this.#gen) return Promise.resolve(this.#cached.table);
    if (this.#inflight?.gen === this.#gen) return this.#inflight.table;
    const gen = this.#gen;
    const table = this.#read(changes, gen, attempt);
    const inflight = { gen, table };
    this.#inflight = inflight;
    const done = () => {
      if (this.#inflight === inflight) this.#inflight = undefined;
    };
    table.then(done, done);
    return table;
  }

  async #read(changes: MountChanges, gen: number, attempt: number): Promise<readonly MountInfo[]> {
    const text = await (this.#reader ?? defaultReader)(this.#path);
    this.#poll(changes);
    if (this.#gen !== gen) {
      // Changed while being read (maybe torn), or since: whatever read is current now, or a new one.
      if (attempt >= MAX_ATTEMPTS)
        throw new MountInfoError(
          `could not get consistent content of ${this.#path} after ${MAX_ATTEMPTS} attempts`,
        );
      return this.#current(changes, attempt + 1);
    }
    const table = freeze(parseMountInfo(text));
    this.#cached = { gen, table };
    return table;
  }

  async #readConsistent(): Promise<readonly MountInfo[]> {
    return parseMountInfo(await consistentRead(this.#path, this.#reader));
  }
}

const defaultReader: TextReader = (path) => readFile(path, 'utf8');

/** Shared between callers: a caller that sorted or edited it would change every other caller's table. */
function freeze(table: MountInfo[]): readonly MountInfo[] {
  for (const m of table) Object.freeze(m);
  return Object.freeze(table);
}
