// Percentiles for figures (benches and chaos suites): one formula everywhere,
// nearest rank (the smallest value with at least p% of the values at or below it).

/** The `p`th percentile (0-100) of `xs` by nearest rank; NaN for no values. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

export const median = (xs: readonly number[]) => percentile(xs, 50);
