// kubelet's NestedPendingOperations, reduced to what pod-local volumes need:
// one operation per key at a time, and per-key exponential backoff
// (0.5 s doubling to 2m2s) that resets when the operation name changes. Unlike
// kubelet, the operations running at once are bounded (a pool): one pod with a
// thousand volumes must not start a thousand mount(8) processes at once; the
// reconciler offers the rest again on its next pass.
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

/** Default pool size: mount work waits on processes and disks more than on CPUs. */
export const defaultMaxConcurrentOperations = () => Math.max(4, 2 * availableParallelism());

export class OperationExecutor {
  readonly #ops = new Map<string, OperationState>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #now: () => number;
  readonly #max: number;
  readonly #perGroup: number;
  #running = 0;
  /** Running operations per key group (the pod UID before the first '/'). */
  readonly #groupRunning = new Map<string, number>();
  readonly #settled: (operationName: string, ok: boolean) => void;

  /** `settled` is called after every operation ends, successful or not (its result is then in state()). */
  constructor(
    now: () => number = Date.now,
    maxConcurrent = defaultMaxConcurrentOperations(),
    settled: (operationName: string, ok: boolean) => void = () => {},
  ) {
    this.#now = now;
    this.#settled = settled;
    this.#max = Math.max(1, maxConcurrent);
    // One pod may take at most half the pool, so the other pods keep being served.
    this.#perGroup = Math.max(1, Math.floor(this.#max / 2));
  }

  /**
   * Starts `fn` for `key` unless an operation for the key is running or the
   * key is backing off after a failure of the same operation.
   */
  run(key: string, operationName: string, fn: () => Promise<void>): RunResult {
    const prev = this.#ops.get(key);
    if (prev?.pending) return 'already-pending';
    const group = key.slice(0, key.indexOf('/') + 1 || key.length);
    if (this.#running >= this.#max || (this.#groupRunning.get(group) ?? 0) >= this.#perGroup) return 'busy';
    let state: OperationState;
    if (prev && prev.operationName === operationName) {
      if (
        prev.lastErrorTime !== undefined &&
        this.#now() - prev.lastErrorTime <= prev.durationBeforeRetryMs
      ) {
        return 'backoff';
      }
      state = prev;
    } else {
      state = { operationName, pending: false, attempts: 0, durationBeforeRetryMs: 0 };
      this.#ops.set(key, state);
    }
    state.pending = true;
    state.attempts++;
    this.#running++;
    this.#groupRunning.set(group, (this.#groupRunning.get(group) ?? 0) + 1);
    const p = (async () => {
      let ok = false;
      try {
        await fn();
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
        this.#running--;
        const n = (this.#groupRunning.get(group) ?? 1) - 1;
        if (n === 0) this.#groupRunning.delete(group);
        else this.#groupRunning.set(group, n);
        this.#settled(operationName, ok);
      }
    })();
    this.#inFlight.add(p);
    void p.finally(() => this.#inFlight.delete(p));
    return 'started';
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

  /** Operations running now (at most the pool size). */
  runningCount(): number {
    return this.#running;
  }

  pendingCount(): number {
    return this.#inFlight.size;
  }
}
