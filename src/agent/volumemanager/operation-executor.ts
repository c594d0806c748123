// kubelet's NestedPendingOperations, reduced to what pod-local volumes need:
// one operation per key at a time, and per-key exponential backoff
// (0.5 s doubling to 2m2s) that resets when the operation name changes. Unlike
// kubelet, the operations running at once are bounded (a pool): one pod with a
// thousand volumes must not start a thousand mount(8) processes at once; the
// reconciler offers the rest again on its next pass. How the pool's slots are
// shared between pods is decided here and nowhere else (offer()), and so is
// when an operation gives its slot back before it ends: while it waits on a
// filesystem that may not answer (whileWaiting()).
import { AsyncLocalStorage } from 'node:async_hooks';
import { availableParallelism } from 'node:os';

export const initialDurationBeforeRetryMs = 500;
export const maxDurationBeforeRetryMs = 2 * 60_000 + 2_000;

export interface OperationState {
  operationName: string;
  pending: boolean;
  attempts: number;
  lastError?: Error;
  lastErrorTime?: number;
  durationBeforeRetryMs: number;
}

export type RunResult = 'started' | 'already-pending' | 'backoff' | 'busy';

/** An operation the reconciler asks to run: `fn` under `key` (a pod UID, '/', a volume name). */
export interface Operation {
  key: string;
  operationName: string;
  fn: () => Promise<void>;
  /**
   * kubelet's nestedpendingoperations volume name, for the operations of a
   * device-mountable volume (a staged CSI volume): one whose `perPod` is false
   * (MountVolume with its MountDevice, UnmountDevice, a resize: kubelet's
   * empty pod name) runs alone among the operations of its device; `perPod`
   * ones (UnmountVolume) only exclude the whole-device ones. The key still
   * holds each operation's backoff and last error.
   */
  device?: { name: string; perPod: boolean };
}

/** A running operation's hold on the pool, found from its async context (whileWaiting). */
interface Slot {
  readonly group: string;
  /** It holds one of the pool's slots now (false while it waits without one). */
  held: boolean;
  ended: boolean;
  /** Set while it waits in #resuming: hands it the slot that freed. */
  resume?: () => void;
}

/** The key group an operation counts against in the pool: its pod (the key up to and with the first '/'). */
const groupOf = (key: string) => key.slice(0, key.indexOf('/') + 1 || key.length);

/**
 * Default pool size: mount work waits on processes and disks more than on
 * CPUs, and a process costs the daemon little to start (posix_spawn, no
 * fork): 8 per CPU, at least 16. docs/behaviour.md (Bounded work) has the
 * measurements this was chosen from.
 */
export const defaultMaxConcurrentOperations = () => Math.max(16, 8 * availableParallelism());

export class OperationExecutor {
  readonly #ops = new Map<string, OperationState>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #now: () => number;
  readonly #max: number;
  /** Half the pool: what a pod may hold while another pod has an operation waiting. */
  readonly #share: number;
  #running = 0;
  /** Running operations per key group (the pod UID before the first '/'). */
  readonly #groupRunning = new Map<string, number>();
  /** Running operations per device (Operation.device): how many, and how many of them whole-device. */
  readonly #deviceRunning = new Map<string, { all: number; whole: number }>();
  readonly #settled: (operationName: string, ok: boolean) => void;
  readonly #lent: () => void;
  /** The slot of the operation a call comes from (a plugin's SetUp is handed no operation object). */
  readonly #slots = new AsyncLocalStorage<Slot>();
  /** Operations waiting on a filesystem without a slot (whileWaiting): at most the pool's size. */
  #waiting = 0;
  /**
   * Operations whose wait ended, each waiting for a slot to go on; a slot that
   * frees goes to the first of them, so while any waits here the pool is full
   * and offer() starts nothing new.
   */
  readonly #resuming: Slot[] = [];

  /**
   * `settled` is called after every operation ends, successful or not (its
   * result is then in state()); `lent` when a running operation gave its slot
   * back to wait (whileWaiting), so that the caller offers what waits again.
   */
  constructor(
    now: () => number = Date.now,
    maxConcurrent = defaultMaxConcurrentOperations(),
    settled: (operationName: string, ok: boolean) => void = () => {},
    lent: () => void = () => {},
  ) {
    this.#now = now;
    this.#settled = settled;
    this.#lent = lent;
    this.#max = Math.max(1, maxConcurrent);
    this.#share = Math.max(1, Math.floor(this.#max / 2));
  }

  /**
   * Starts what the pool allows of one reconciler pass's operations (every
   * operation the pass wants, in the order it prefers them) and returns what
   * became of each. An operation is not started while one for its key runs, or
   * while its key backs off after a failure of the same operation; the others
   * wait for a slot, and the pool shares its slots between pods so:
   * - first, in the order offered, to pods holding less than half the pool;
   * - then, work-conserving, the slots still free go to a pod beyond its half
   *   only if it is the only pod with operations waiting. So one pod alone
   *   uses the whole pool (a 3-volume pod is set up in one round), while a pod
   *   with a thousand volumes never keeps another pod waiting for more than the
   *   end of one of its operations: once another pod waits, a slot that frees
   *   goes to it, not back to the pod beyond half.
   * Every pass offers every waiting operation again (after each operation ends,
   * and every loop period), so "waiting" is what this call could not start.
   */
  offer(operations: readonly Operation[]): RunResult[] {
    const results: RunResult[] = [];
    const waiting: [number, Operation][] = [];
    operations.forEach((op, i) => {
      const admitted = this.#admit(op);
      if (admitted !== 'waiting') results[i] = admitted;
      else if (this.#running < this.#max && this.#groupCount(groupOf(op.key)) < this.#share) {
        results[i] = this.#start(op);
      } else {
        results[i] = 'busy';
        waiting.push([i, op]);
      }
    });
    if (new Set(waiting.map(([, op]) => groupOf(op.key))).size !== 1) return results;
    for (const [i, op] of waiting) {
      if (this.#running >= this.#max) break;
      if (this.#admit(op) === 'waiting') results[i] = this.#start(op);
    }
    return results;
  }

  /** One operation offered on its own: offer([{ key, operationName, fn }]). */
  run(key: string, operationName: string, fn: () => Promise<void>): RunResult {
    return this.offer([{ key, operationName, fn }])[0] ?? 'busy';
  }

  #groupCount(group: string): number {
    return this.#groupRunning.get(group) ?? 0;
  }

  /** Whether `op` may start as far as its key is concerned: 'waiting' (for a slot) if so. */
  #admit(op: Operation): 'waiting' | 'already-pending' | 'backoff' {
    const prev = this.#ops.get(op.key);
    if (prev?.pending) return 'already-pending';
    if (op.device) {
      const d = this.#deviceRunning.get(op.device.name);
      if (d && (op.device.perPod ? d.whole > 0 : d.all > 0)) return 'already-pending';
    }
    if (
      prev &&
      prev.operationName === op.operationName &&
      prev.lastErrorTime !== undefined &&
      this.#now() - prev.lastErrorTime <= prev.durationBeforeRetryMs
    ) {
      return 'backoff';
    }
    return 'waiting';
  }

  #start({ key, operationName, fn, device }: Operation): 'started' {
    const group = groupOf(key);
    const releaseDevice = this.#holdDevice(device);
    const prev = this.#ops.get(key);
    let state: OperationState;
    if (prev && prev.operationName === operationName) state = prev;
    else {
      state = { operationName, pending: false, attempts: 0, durationBeforeRetryMs: 0 };
      this.#ops.set(key, state);
    }
    state.pending = true;
    state.attempts++;
    const slot: Slot = { group, held: false, ended: false };
    this.#take(slot);
    const p = (async () => {
      let ok = false;
      try {
        await this.#slots.run(slot, fn);
        this.#ops.delete(key);
        ok = true;
      } catch (err) {
        state.pending = false;
        state.lastError = err instanceof Error ? err : new Error(String(err));
        state.lastErrorTime = this.#now();
        state.durationBeforeRetryMs =
          state.durationBeforeRetryMs === 0
            ? initialDurationBeforeRetryMs
            : Math.min(state.durationBeforeRetryMs * 2, maxDurationBeforeRetryMs);
      } finally {
        slot.ended = true;
        if (slot.held) this.#give(slot);
        releaseDevice();
        this.#settled(operationName, ok);
      }
    })();
    this.#inFlight.add(p);
    void p.finally(() => this.#inFlight.delete(p));
    return 'started';
  }

  /**
   * Runs `wait`, a wait of the calling operation on something that may not
   * answer until its deadline (a stat probe of a served filesystem, a umount
   * of one that hangs), with the operation's slot given back meanwhile: the
   * pool's slots are held by operations doing work, so a hung filesystem
   * never holds the slots other pods need. When the wait ends the operation
   * takes a slot again before it goes on (the first that frees, before any new
   * operation starts: it has work half done).
   *
   * Bounded: at most the pool's size of operations wait without a slot at once
   * (beyond that an operation waits holding its slot, as before), so at most
   * twice the pool's operations are in flight, and what a waiting operation
   * holds is its probe's result to come (one child process per path,
   * StatProbe) and the directories its walks keep open. Outside an operation
   * of this pool (volume stats, `podvol plan`), `wait` just runs.
   */
  async whileWaiting<T>(wait: () => Promise<T>): Promise<T> {
    const slot = this.#slots.getStore();
    if (!slot?.held || this.#waiting >= this.#max) return wait();
    this.#waiting++;
    this.#give(slot);
    this.#lent();
    try {
      return await wait();
    } finally {
      this.#waiting--;
      await this.#retake(slot);
    }
  }

  /** `slot` holds a slot of the pool from now (counted against its pod). */
  #take(slot: Slot): void {
    slot.held = true;
    this.#running++;
    this.#groupRunning.set(slot.group, this.#groupCount(slot.group) + 1);
  }

  /** `slot` gives its slot back: to the first operation resuming after a wait, if any. */
  #give(slot: Slot): void {
    slot.held = false;
    this.#running--;
    const n = this.#groupCount(slot.group) - 1;
    if (n <= 0) this.#groupRunning.delete(slot.group);
    else this.#groupRunning.set(slot.group, n);
    let next = this.#resuming.shift();
    // One whose operation ended meanwhile (its wait not awaited) goes on without a slot.
    while (next?.ended) {
      next.resume?.();
      next = this.#resuming.shift();
    }
    if (next) {
      this.#take(next);
      next.resume?.();
      next.resume = undefined;
    }
  }

  /** After a wait: a free slot at once, or the next one that frees (before any new operation). */
  async #retake(slot: Slot): Promise<void> {
    if (slot.ended) return;
    if (this.#running < this.#max && this.#resuming.length === 0) return this.#take(slot);
    const { promise, resolve } = Promise.withResolvers<void>();
    slot.resume = resolve;
    this.#resuming.push(slot);
    await promise;
  }

  /** Counts a starting operation against its device; returns its release. */
  #holdDevice(device: Operation['device']): () => void {
    if (!device) return () => {};
    const d = this.#deviceRunning.get(device.name) ?? { all: 0, whole: 0 };
    d.all++;
    if (!device.perPod) d.whole++;
    this.#deviceRunning.set(device.name, d);
    return () => {
      d.all--;
      if (!device.perPod) d.whole--;
      if (d.all === 0) this.#deviceRunning.delete(device.name);
    };
  }

  /** Whether any key starting with `prefix` (e.g. a pod UID and '/') has an operation running. */
  anyPending(prefix: string): boolean {
    for (const [key, s] of this.#ops) if (s.pending && key.startsWith(prefix)) return true;
    return false;
  }

  isPending(key: string): boolean {
    return this.#ops.get(key)?.pending ?? false;
  }

  /** The last failure of a key still backing off or retrying, for /status. */
  state(key: string): Readonly<OperationState> | undefined {
    return this.#ops.get(key);
  }

  /** Forget a key (its subject is gone); a running operation is left to finish. */
  forget(key: string): void {
    const s = this.#ops.get(key);
    if (s && !s.pending) this.#ops.delete(key);
  }

  /** Resolves when every operation started so far has finished. */
  async drain(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /** Operations holding a slot now (at most the pool size). */
  runningCount(): number {
    return this.#running;
  }

  /** Operations waiting on a filesystem without a slot now (at most the pool size; whileWaiting). */
  waitingCount(): number {
    return this.#waiting;
  }

  pendingCount(): number {
    return this.#inFlight.size;
  }
}
