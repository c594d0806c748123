// Kubernetes resource.Quantity (k8s.io/apimachinery pkg/api/resource/quantity.go).
// A quantity is held as an exact count of nano-units, the finest precision the
// Go type keeps, so CPU millicores and memory bytes are both exact.

import { ownValue } from '../../own.ts';
import { VolumeError } from '../../volumehost/volume.ts';

export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

export interface Quantity {
  /** The value times 10^9, rounded away from zero like ParseQuantity does below 1n. */
  readonly nanos: bigint;
  /** The suffix family the string used; kept for completeness, it does not affect the value. */
  readonly format: QuantityFormat;
}

const SPLIT_RE = '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$';
export const ERR_FORMAT_WRONG = `quantities must match the regular expression '${SPLIT_RE}'`;
export const ERR_NUMERIC = 'unable to parse numeric part of quantity';
export const ERR_SUFFIX = "unable to parse quantity's suffix";

const MAX_INT64 = (1n << 63n) - 1n;
const NANO = 1_000_000_000n;
const SUFFIX_CHARS = 'eEinumkKMGTP';

const DECIMAL_SUFFIXES: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };

export class QuantityError extends Error {
  readonly input: string;
  /** What is wrong, without the input: for messages that name the field themselves. */
  readonly detail: string;
  /** A well-formed quantity above 2^63-1 (Go would hold it; podvol's arithmetic cannot). */
  readonly tooLarge: boolean;
  constructor(input: string, detail: string, tooLarge = false) {
    super(`invalid quantity ${JSON.stringify(input)}: ${detail}`);
    this.name = 'QuantityError';
    this.input = input;
    this.detail = detail;
    this.tooLarge = tooLarge;
  }
}

interface Scanned {
  positive: boolean;
  num: string;
  denom: string;
  suffix: string;
}

// Port of parseQuantityString: the same permissive scanner, so the same strings
// are accepted ("1.", ".5", "+" and "-" are all legal and the last two are 0).
function scan(str: string): Scanned | undefined {
  const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
  let positive = true;
  let pos = 0;
  const end = str.length;
  if (str[0] === '-') {
    positive = false;
    pos++;
  } else if (str[0] === '+') {
    pos++;
  }
  while (pos < end && str[pos] === '0') pos++;
  if (pos >= end) return { positive, num: '0', denom: '', suffix: '' };
  let i = pos;
  while (i < end && isDigit(str[i])) i++;
  let num = str.slice(pos, i);
  pos = i;
  if (num.length === 0) num = '0';
  let denom = '';
  if (pos < end && str[pos] === '.') {
    pos++;
    i = pos;
    while (i < end && isDigit(str[i])) i++;
    denom = str.slice(pos, i);
    pos = i;
  }
  const suffixStart = pos;
  while (pos < end && SUFFIX_CHARS.includes(str.charAt(pos))) pos++;
  if (pos < end && (str[pos] === '-' || str[pos] === '+')) pos++;
  while (pos < end && isDigit(str.charAt(pos))) pos++;
  // Anything left over is neither suffix letters, a sign nor exponent digits.
  if (pos < end) return undefined;
  return { positive, num, denom, suffix: str.slice(suffixStart) };
}

function interpretSuffix(
  suffix: string,
): { base: 10 | 2; exponent: number; format: QuantityFormat } | undefined {
  const decimal = ownValue(DECIMAL_SUFFIXES, suffix);
  if (decimal !== undefined) return { base: 10, exponent: decimal, format: 'DecimalSI' };
  const binary = ownValue(BINARY_SUFFIXES, suffix);
  if (binary !== undefined) return { base: 2, exponent: binary, format: 'BinarySI' };
  if (
    suffix.length > 1 &&
    (suffix[0] === 'e' || suffix[0] === 'E') &&
    /^[-+]?[0-9]+$/.test(suffix.slice(1))
  ) {
    const exponent = Number(suffix.slice(1));
    // Go parses the exponent as an int64; anything beyond is a suffix error there too.
    if (!Number.isSafeInteger(exponent)) return undefined;
    return { base: 10, exponent, format: 'DecimalExponent' };
  }
  return undefined;
}

/**
 * Parses a Kubernetes quantity string ("100m", "1.5Gi", "1e3", "64Mi").
 * Deliberate difference from Go: a magnitude above 2^63-1 is rejected
 * (Go silently caps binary-SI values there and keeps larger decimal ones).
 */
export function parseQuantity(input: string): Quantity {
  if (typeof input !== 'string') throw new QuantityError(String(input), 'a quantity must be a string');
  if (input.length === 0) throw new QuantityError(input, ERR_FORMAT_WRONG);
  if (input === '0') return { nanos: 0n, format: 'DecimalSI' };
  const scanned = scan(input);
  if (!scanned) throw new QuantityError(input, ERR_FORMAT_WRONG);
  const suffix = interpretSuffix(scanned.suffix);
  if (!suffix) throw new QuantityError(input, ERR_SUFFIX);
  const { positive, num, denom } = scanned;
  // A bare sign or dot still has num "0"; Go's inf.Dec fallback rejects a
  // digit-less number only when the value needs more than nano precision.
  const hasDigits = /[0-9]/.test(input.slice(0, input.length - scanned.suffix.length));
  const mantissa = BigInt(num + denom);
  // value = mantissa * 10^exp10 * 2^exp2
  const exp10 = (suffix.base === 10 ? suffix.exponent : 0) - denom.length;
  const exp2 = suffix.base === 2 ? suffix.exponent : 0;
  if (!hasDigits && exp10 < -9) throw new QuantityError(input, ERR_NUMERIC);
  const format: QuantityFormat = suffix.format;
  if (mantissa === 0n) return { nanos: 0n, format };

  // Bound the magnitude before building big powers of ten: a value whose
  // integer part has more than 20 digits is certainly above 2^63-1.
  const digits = mantissa.toString().length;
  const log10Upper = digits + exp10 + Math.ceil(exp2 * Math.log10(2));
  if (log10Upper > 21) throw tooLarge(input);
  let nanos: bigint;
  const shift = exp10 + 9;
  const scaled = mantissa << BigInt(exp2);
  if (shift >= 0) {
    nanos = scaled * 10n ** BigInt(shift);
  } else if (-shift > scaled.toString().length + 1) {
    // Far below one nano: Go rounds any non-zero amount up to 1n.
    nanos = 1n;
  } else {
    const div = 10n ** BigInt(-shift);
    nanos = (scaled + div - 1n) / div;
  }
  if (nanos > MAX_INT64 * NANO) throw tooLarge(input);
  const effectiveFormat = format === 'BinarySI' && nanos < NANO ? 'DecimalSI' : format;
  return { nanos: positive ? nanos : -nanos, format: effectiveFormat };
}

function tooLarge(input: string): QuantityError {
  return new QuantityError(input, `its magnitude exceeds 2^63-1 (${MAX_INT64})`, true);
}

// ceil(|n| / d) with the sign of n: Quantity.ScaledValue rounds away from zero.
function divAwayFromZero(n: bigint, d: bigint): bigint {
  const mag = n < 0n ? -n : n;
  const q = (mag + d - 1n) / d;
  return n < 0n ? -q : q;
}

/** Quantity.Value(): whole units (bytes for memory), rounded away from zero. */
export function quantityValue(q: Quantity): bigint {
  return divAwayFromZero(q.nanos, NANO);
}

/** Quantity.MilliValue(): thousandths (millicores for CPU), rounded away from zero. */
export function quantityMilliValue(q: Quantity): bigint {
  return divAwayFromZero(q.nanos, 1_000_000n);
}

/** Quantity.Cmp: -1, 0 or 1. */
export function compareQuantities(a: Quantity, b: Quantity): -1 | 0 | 1 {
  if (a.nanos === b.nanos) return 0;
  return a.nanos < b.nanos ? -1 : 1;
}

export function isZeroQuantity(q: Quantity): boolean {
  return q.nanos === 0n;
}

/**
 * A byte count from a pod spec (emptyDir sizeLimit, memory limits): a quantity
 * that is not negative, as Value(). The one rule validation and the plugins share;
 * the magnitude bound (2^63-1) is parseQuantity's.
 */
export function parseByteSize(input: string): bigint {
  const q = parseQuantity(input);
  if (q.nanos < 0n) throw new QuantityError(input, 'must be greater than or equal to 0');
  return quantityValue(q);
}

/** parseByteSize for a volume's setup: a VolumeError naming `what` (InvalidSizeLimit for a sizeLimit). */
export function volumeByteSize(value: string, what: string): bigint {
  try {
    return parseByteSize(String(value));
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    const reason = what === 'sizeLimit' ? 'InvalidSizeLimit' : 'InvalidQuantity';
    throw new VolumeError(reason, `invalid ${what} ${JSON.stringify(String(value))}: ${err.detail}`, {
      cause: err,
    });
  }
}

const DECIMAL_SUFFIX_BY_EXPONENT: Record<number, string> = {
  [-9]: 'n',
  [-6]: 'u',
  [-3]: 'm',
  0: '',
  3: 'k',
  6: 'M',
  9: 'G',
  12: 'T',
  15: 'P',
  18: 'E',
};
const BINARY_SUFFIX_BY_POWER = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

/**
 * Quantity.String(): the canonical form ("2048Ki" prints as "2Mi", "2000000"
 * as "2M"). Binary values that are not whole or lie in (-1024, 1024) print in
 * decimal SI, as Go's CanonicalizeBytes does.
 */
export function formatQuantity(q: Quantity): string {
  if (q.nanos === 0n) return '0';
  const negative = q.nanos < 0n;
  const mag = negative ? -q.nanos : q.nanos;
  const sign = negative ? '-' : '';
  if (q.format === 'BinarySI' && mag % NANO === 0n && mag / NANO >= 1024n) {
    let amount = mag / NANO;
    let power = 0;
    while (power < 6 && amount % 1024n === 0n) {
      amount /= 1024n;
      power++;
    }
    return `${sign}${amount}${BINARY_SUFFIX_BY_POWER[power]}`;
  }
  let amount = mag;
  let exponent = -9;
  while (amount % 10n === 0n) {
    amount /= 10n;
    exponent++;
  }
  const r = ((exponent % 3) + 3) % 3;
  amount *= 10n ** BigInt(r);
  exponent -= r;
  if (q.format === 'DecimalExponent') return `${sign}${amount}${exponent === 0 ? '' : `e${exponent}`}`;
  while (exponent > 18) {
    amount *= 1000n;
    exponent -= 3;
  }
  return `${sign}${amount}${DECIMAL_SUFFIX_BY_EXPONENT[exponent]}`;
}
