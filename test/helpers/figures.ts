// What benches and chaos suites compute their figures with: percentiles (one
// formula everywhere: nearest rank, the smallest value with at least p% of the
// values at or below it) and a process's memory.
import { readFileSync } from 'node:fs';

/** The `p`th percentile (0-100) of `xs` by nearest rank; NaN for no values. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

export const median = (xs: readonly number[]) => percentile(xs, 50);

/** VmRSS and VmHWM (peak) of a running process, in MiB. */
export function procMemory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}
