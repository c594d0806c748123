// emptyDir's validation, as the API server's: only a negative sizeLimit is
// refused. The medium is not validated there; an unknown one fails SetUp with
// kubelet's "unknown storage medium" (emptydir.ts).
import { type Add, type Obj, QUANTITY_MSG, q } from './util/field-errors.ts';
import { parseQuantity, QuantityError } from './util/quantity.ts';

/** The sign of a sizeLimit, by the same exact parser the plugin sizes with; undefined when it is not a quantity. */
function sizeLimitSign(limit: unknown): -1 | 1 | undefined {
  if (typeof limit !== 'string' && typeof limit !== 'number') return undefined;
  try {
    return parseQuantity(String(limit)).nanos < 0n ? -1 : 1;
  } catch (err) {
    // Go parses any magnitude and the API server admits it; the plugin then ignores a limit beyond int64 bytes.
    if (err instanceof QuantityError && err.tooLarge) return String(limit).startsWith('-') ? -1 : 1;
    return undefined;
  }
}

export function validateEmptyDirSource(src: Obj, field: string, add: Add): void {
  const limit = src.sizeLimit;
  if (limit === undefined || limit === null) return;
  const f = `${field}.sizeLimit`;
  const sign = sizeLimitSign(limit);
  if (sign === undefined) {
    add('InvalidSizeLimit', `${f}: Invalid value: ${q(limit)}: ${QUANTITY_MSG}`);
    return;
  }
  if (sign < 0) add('InvalidSizeLimit', `${f}: Forbidden: SizeLimit field must be a valid resource quantity`);
}
