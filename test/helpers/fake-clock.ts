// A Clock a test drives: time moves only when the test calls advance(), which
// fires the timers that fall due, in order; random() is a fixed value.
import type { Clock, Timer } from '../../src/clock.ts';

export interface FakeClock extends Clock {
  /** Moves time forward by `ms`, firing due timers (and letting their promise callbacks run). */
  advance(ms: number): Promise<void>;
  /** Timers not yet fired or cancelled. */
  pending(): number;
}

export function fakeClock(start = Date.UTC(2026, 0, 1), random = 0.5): FakeClock {
  let now = start;
  let seq = 0;
  const timers = new Map<number, { due: number; fn: () => void; every?: number }>();
  const add = (ms: number, fn: () => void, every?: number): Timer => {
    const id = seq++;
    timers.set(id, { due: now + Math.max(0, ms), fn, every });
    return { cancel: () => timers.delete(id) };
  };
  const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
  return {
    now: () => now,
    after: (ms, fn) => add(ms, fn),
    every: (ms, fn) => add(ms, fn, ms),
    random: () => random,
    pending: () => timers.size,
    async advance(ms) {
      const until = now + ms;
      for (;;) {
        await flush();
        const next = [...timers.entries()]
          .filter(([, t]) => t.due <= until)
          .sort((a, b) => a[1].due - b[1].due || a[0] - b[0])[0];
        if (!next) break;
        const [id, t] = next;
        now = t.due;
        if (t.every !== undefined) t.due += Math.max(1, t.every);
        else timers.delete(id);
        t.fn();
      }
      now = until;
      await flush();
    },
  };
}
