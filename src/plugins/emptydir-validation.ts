// emptyDir's validation, as the API server's: only a negative sizeLimit is
// refused. The medium is not validated there; an unknown one fails SetUp with
// kubelet's "unknown storage medium" (emptydir.ts).
import { type Add, type Obj, QUANTITY_MSG, q, quantityValue, VolumeReason } from './util/field-errors.ts';

export function validateEmptyDirSource(src: Obj, field: string, add: Add): void {
  const limit = src.sizeLimit;
  if (limit === undefined || limit === null) return;
  const f = `${field}.sizeLimit`;
  const value = quantityValue(limit);
  if (value === undefined) {
    add(VolumeReason.InvalidSizeLimit, `${f}: Invalid value: ${q(limit)}: ${QUANTITY_MSG}`);
    return;
  }
  if (value < 0)
    add(VolumeReason.InvalidSizeLimit, `${f}: Forbidden: SizeLimit field must be a valid resource quantity`);
}
