// Memory given back after a big teardown (issue 20, P4). V8 grows its committed
// heap under a burst of SetUps and keeps it once the pods are gone: nothing of
// theirs is retained (the used heap returns near idle), but RSS stays at about
// twice idle because V8's own heuristics never shrink a heap the process is no
// longer allocating in. So when the actual state has dropped from many volumes
// to few and the daemon has been quiet for a moment, with no operation in
// flight, podvol asks V8 once for the collection it makes under memory
// pressure ("last resort": full collections with compaction, new space shrunk,
// pooled pages unmapped), then glibc for the free pages of its heaps
// (malloc_trim, through native/malloctrim). Not on every teardown: a pod or two going away costs
// V8 nothing to keep, and the collection pauses the event loop (about 0.1 s
// per 200 MiB of heap). The policy and its figures: docs/performance.md,
// "Memory given back".
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadAddon } from '../addon.ts';
import type { Clock, Timer } from '../clock.ts';
import type { Logger } from '../logger.ts';

/**
 * Volumes torn down since the peak before a give-back is considered: V8 commits
 * 55–115 KiB of heap per volume set up in a burst (300 pods × 4 volumes: from
 * 40 to 106–179 MiB), so below this the heap held is a few MiB, not worth a pause.
 */
export const GIVE_BACK_MIN_RELEASED = 200;
/** …and the actual state must be at most this share of its peak: few volumes left, not churn at a steady count. */
export const GIVE_BACK_MAX_LEFT = 0.25;
/** How long nothing may have changed (no volume, no operation) before the collection runs. */
export const GIVE_BACK_QUIET_MS = 3000;

export interface GiveBackOptions {
  clock: Clock;
  logger: Logger;
  /** Volumes in the actual state now (O(1): called on every state change). */
  volumes: () => number;
  /** Whether an operation is in flight: the collection never pauses one. */
  busy: () => boolean;
  /** The give-back itself (default: giveBackMemory()). */
  collect?: () => void;
  /** What the process holds, for the log line (default: process.memoryUsage()). */
  memory?: () => { rss: number; heapTotal: number; heapUsed: number };
  minReleased?: number;
  maxLeft?: number;
  quietMs?: number;
}

/**
 * V8's memory-pressure collection, through the `gc` function V8 exposes to
 * contexts created after `--expose-gc` is set (the way jest's leak detector
 * reaches it): set at the first give-back, not at start, so a podvol that never
 * tears much down runs with V8's flags untouched, from the sources, the bundle
 * or the single executable alike. `flavor: 'last-resort'` is what releases the
 * heap (a plain gc() collects but keeps the pages committed); a V8 without the
 * option makes a plain full collection.
 */
export function lastResortCollection(): () => void {
  let gc: ((opts?: object) => void) | undefined;
  return () => {
    if (!gc) {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as (opts?: object) => void;
    }
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  };
}

/**
 * glibc's malloc_trim(0) through the addon at `addon` (tests name a missing
 * one): the C heap's free pages back to the kernel. Loaded at the first call
 * (in the single executable, import.meta.url extracts the assets); false when
 * the addon is missing or nothing was released.
 */
export function mallocTrim(addon?: URL): () => boolean {
  let trim: (() => boolean) | null | undefined;
  return () => {
    if (trim === undefined) {
      try {
        trim = loadAddon<{ trim(): boolean }>('malloctrim', addon).trim;
      } catch {
        trim = null;
      }
    }
    return trim ? trim() : false;
  };
}

/** V8's heap, then the C heap: what the give-back runs. */
export function giveBackMemory(): () => void {
  const collect = lastResortCollection();
  const trim = mallocTrim();
  return () => {
    collect();
    trim();
  };
}

const MiB = 2 ** 20;
const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;

/**
 * Watches the actual state's size through changed() (called after every
 * change of the volume manager's state) and runs the collection once per big
 * drop: when at most `maxLeft` of the peak is left, at least `minReleased`
 * volumes went, nothing changed for `quietMs` and no operation is in flight.
 * The peak restarts from what is left after each collection.
 */
export class GiveBack {
  readonly #o: Required<GiveBackOptions>;
  /** The most volumes seen since start or since the last collection. */
  #peak = 0;
  #lastChange = 0;
  #timer: Timer | undefined;
  #stopped = false;

  constructor(o: GiveBackOptions) {
    this.#o = {
      collect: giveBackMemory(),
      memory: () => process.memoryUsage(),
      minReleased: GIVE_BACK_MIN_RELEASED,
      maxLeft: GIVE_BACK_MAX_LEFT,
      quietMs: GIVE_BACK_QUIET_MS,
      ...o,
    };
  }

  /** Something changed (a volume, an operation's outcome): cheap, called thousands of times in a burst. */
  changed(): void {
    if (this.#stopped) return;
    const n = this.#o.volumes();
    if (n > this.#peak) this.#peak = n;
    this.#lastChange = this.#o.clock.now();
    if (!this.#timer && this.#dropped(n)) this.#arm(this.#o.quietMs);
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #dropped(n: number): boolean {
    return this.#peak - n >= this.#o.minReleased && n <= this.#peak * this.#o.maxLeft;
  }

  /** One timer for a whole burst: a change while it waits moves the deadline, not the timer. */
  #arm(ms: number): void {
    this.#timer = this.#o.clock.after(ms, () => this.#due(), { unref: true });
  }

  #due(): void {
    this.#timer = undefined;
    if (this.#stopped) return;
    const quietFor = this.#o.clock.now() - this.#lastChange;
    if (quietFor < this.#o.quietMs) {
      this.#arm(this.#o.quietMs - quietFor);
      return;
    }
    if (this.#o.busy()) {
      this.#arm(this.#o.quietMs);
      return;
    }
    const n = this.#o.volumes();
    // Volumes came back meanwhile (a rollout's new pods): their heap is in use again.
    if (!this.#dropped(n)) return;
    const peak = this.#peak;
    this.#peak = n;
    const before = this.#o.memory();
    const t0 = performance.now();
    try {
      this.#o.collect();
    } catch (err) {
      this.#o.logger.warn({ err: String(err) }, 'memory give-back failed');
      return;
    }
    const ms = Math.round(performance.now() - t0);
    const after = this.#o.memory();
    this.#o.logger.info(
      {
        volumes: n,
        peakVolumes: peak,
        ms,
        heapUsedMiB: [mib(before.heapUsed), mib(after.heapUsed)],
        heapTotalMiB: [mib(before.heapTotal), mib(after.heapTotal)],
        rssMiB: [mib(before.rss), mib(after.rss)],
      },
      'gave memory back after teardown',
    );
  }
}
