// What a start of the daemon has opened so far, so that a start that fails or
// is stopped (SIGTERM) closes it again: a listener or runtime socket left open
// by a failed start kept podvol alive, answering, and deaf to SIGTERM.
import { errorMessage } from '../errno.ts';
import type { Logger } from '../logger.ts';

/** A start stopped by a signal before it finished. */
export class StartAborted extends Error {
  readonly code = 'StartAborted';
  readonly signal: string;
  constructor(signal: string) {
    super(`stopped by ${signal} during start-up`);
    this.signal = signal;
  }
}

/**
 * A start that failed or was stopped, after its clean-up: `cause` is why, and
 * `leftBehind` names what did not close in time (a step stuck in the kernel
 * keeps a thread of the pool, and Node's exit waits for every one).
 */
export class StartFailed extends Error {
  readonly leftBehind: string[];
  constructor(cause: unknown, leftBehind: string[]) {
    super(errorMessage(cause), { cause });
    this.leftBehind = leftBehind;
  }
}

/** How long one closer may take during a failed start before the next one runs. */
export const CLOSE_BOUND_MS = 5_000;

export class Opened {
  readonly #closers: { what: string; close: () => unknown }[] = [];
  readonly #log: Logger;
  readonly #signal: AbortSignal | undefined;
  /** `signal`: the stop signal; every step ends (rejects with its reason) when it aborts. */
  constructor(log: Logger, signal?: AbortSignal) {
    this.#log = log;
    this.#signal = signal;
  }

  /** Awaits one step of the start, unless the start is stopped first (the step itself runs on). */
  step<T>(step: Promise<T>): Promise<T> {
    return unlessAborted(this.#signal, step);
  }

  /**
   * A step that opens something: closed with `close` once it has opened, even
   * when the start was stopped while it was still opening.
   */
  open<T>(what: string, opening: Promise<T>, close: (opened: T) => unknown): Promise<T> {
    this.add(what, () => opening.then(close, () => {}));
    return this.step(opening);
  }

  /** Registers how to close something just opened (or about to be: its closer must cope with a half-open one). */
  add(what: string, close: () => unknown): void {
    this.#closers.push({ what, close });
  }

  /**
   * Closes everything, the last opened first. A closer that fails is logged and
   * the rest still run; one that hangs (a scan stuck on a dead filesystem) is left
   * behind after CLOSE_BOUND_MS, as a failed start must end.
   */
  async closeAll(): Promise<string[]> {
    const leftBehind: string[] = [];
    for (const { what, close } of this.#closers.splice(0).reverse()) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'hung'>((res) => {
        timer = setTimeout(() => res('hung'), CLOSE_BOUND_MS);
      });
      try {
        const r = await Promise.race([Promise.resolve().then(close), bound]);
        if (r === 'hung') {
          leftBehind.push(what);
          this.#log.warn({ what, ms: CLOSE_BOUND_MS }, 'not closed in time; left behind');
        }
      } catch (err) {
        this.#log.warn({ what, err: errorMessage(err) }, 'closing after a failed start failed');
      } finally {
        clearTimeout(timer);
      }
    }
    return leftBehind;
  }
}

/** `step`, or a rejection with the signal's reason as soon as it aborts (the step itself runs on). */
function unlessAborted<T>(signal: AbortSignal | undefined, step: Promise<T>): Promise<T> {
  if (!signal) return step;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    step.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
