// kubelet's NestedPendingOperations, reduced to what pod-local volumes need:
// one operation per key at a time, and per-key exponential backoff
// (0.5 s doubling to 2m2s) that resets when the operation name changes.

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

export type RunResult = 'started' | 'already-pending' | 'backoff';

export class OperationExecutor {
  readonly #ops = new Map<string, OperationState>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * Starts `fn` for `key` unless an operation for the key is running or the
   * key is backing off after a failure of the same operation.
   */
  run(key: string, operationName: string, fn: () => Promise<void>): RunResult {
    const prev = this.#ops.get(key);
    if (prev?.pending) return 'already-pending';
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
    const p = (async () => {
      try {
        await fn();
        this.#ops.delete(key);
      } catch (err) {
        state.pending = false;
        state.lastError = err instanceof Error ? err : new Error(String(err));
        state.lastErrorTime = this.#now();
        state.durationBeforeRetryMs =
          state.durationBeforeRetryMs === 0
            ? initialDurationBeforeRetryMs
            : Math.min(state.durationBeforeRetryMs * 2, maxDurationBeforeRetryMs);
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

  pendingCount(): number {
    return this.#inFlight.size;
  }
}
