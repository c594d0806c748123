// Byte quantities from pod specs, with the reason a bad one is reported under.
import { VolumeError } from './types.ts';
import { parseBytes } from './util/quantity.ts';

const maxInt64 = (1n << 63n) - 1n;

export function quantityToBigInt(value: string, what: string): bigint {
  const reason = what === 'sizeLimit' ? 'InvalidSizeLimit' : 'InvalidQuantity';
  let bytes: bigint;
  try {
    bytes = parseBytes(String(value));
  } catch (err) {
    throw new VolumeError(reason, `invalid ${what} "${value}": ${(err as Error).message}`);
  }
  if (bytes < 0n) throw new VolumeError(reason, `invalid ${what} "${value}": must not be negative`);
  if (bytes > maxInt64) throw new VolumeError(reason, `invalid ${what} "${value}": larger than 2^63-1 bytes`);
  return bytes;
}
