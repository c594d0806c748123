// Time, timers and randomness, passed to whatever needs them (the reflector,
// the static pod source, the cluster wiring) so tests can drive them: a fake
// clock fires timers when the test advances it, and draws no random jitter.
// No module-level clock: each owner gets one (default: systemClock()).

/** A pending timer; cancel() is harmless once it fired. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once after `ms`. `unref`: the timer alone does not keep the process alive. */
  after(ms: number, fn: () => void, opts?: { unref?: boolean }): Timer;
  /** Calls `fn` every `ms` until cancelled. */
  every(ms: number, fn: () => void, opts?: { unref?: boolean }): Timer;
  /** A number in [0, 1), for jitter. */
  random(): number;
}

export function systemClock(): Clock {
  return {
    now: () => Date.now(),
    after(ms, fn, opts) {
      const t = setTimeout(fn, ms);
      if (opts?.unref) t.unref();
      return { cancel: () => clearTimeout(t) };
    },
    every(ms, fn, opts) {
      const t = setInterval(fn, ms);
      if (opts?.unref) t.unref();
      return { cancel: () => clearInterval(t) };
    },
    random: () => Math.random(),
  };
}

/** Resolves after `ms` on `clock` (a poll's pause). */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}
