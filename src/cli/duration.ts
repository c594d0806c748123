// Durations as kubelet's flags take them: Go's time.ParseDuration syntax
// ("1m0s", "90s", "1h30m", "500ms", "1.5h"), so a value copied from a
// kubelet command line or KubeletConfiguration means the same here.

const unitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const element = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Parses a Go duration into milliseconds; throws with the reason on anything else. */
export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === '0') return 0;
  let i = 0;
  let sign = 1;
  if (s[0] === '+' || s[0] === '-') {
    sign = s[0] === '-' ? -1 : 1;
    i = 1;
  }
  if (i === s.length) throw new Error(`invalid duration "${text}"`);
  let ms = 0;
  while (i < s.length) {
    element.lastIndex = i;
    const m = element.exec(s);
    if (!m) {
      throw new Error(
        /^\d+(\.\d*)?$/.test(s.slice(i))
          ? `invalid duration "${text}": missing unit (for example 90s or 1m0s)`
          : `invalid duration "${text}" (for example 90s, 1m0s or 1h30m)`,
      );
    }
    const [, amount = '', unit = ''] = m;
    // The pattern names only units of the table.
    const perUnit = unitMs[unit];
    if (perUnit === undefined) throw new Error(`invalid duration "${text}"`);
    ms += Number(amount) * perUnit;
    i = element.lastIndex;
  }
  return sign * ms;
}

/** Renders milliseconds as Go's Duration.String() does ("1m0s", "1h30m0s", "500ms"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${trimFloat(rest)}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const secs = `${trimFloat(rest / 1000)}s`;
  if (h > 0) return `${sign}${h}h${m}m${secs}`;
  if (m > 0) return `${sign}${m}m${secs}`;
  return `${sign}${secs}`;
}

const trimFloat = (n: number) => String(Number(n.toFixed(9)));
