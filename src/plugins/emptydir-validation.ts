// emptyDir's validation: medium and sizeLimit.
import { type Add, type Obj, QUANTITY_MSG, q, quantityValue, VolumeReason } from './util/field-errors.ts';

// The largest byte count kubelet can hold (int64); anything above is not a size, it is a typo.
const MAX_SIZE_BYTES = 2 ** 63 - 1;

export function validateEmptyDirSource(src: Obj, field: string, add: Add): void {
  const medium = src.medium ?? '';
  if (
    typeof medium !== 'string' ||
    !(medium === '' || medium === 'Memory' || /^HugePages(-.+)?$/.test(medium))
  ) {
    add(
      VolumeReason.InvalidField,
      `${field}.medium: Unsupported value: ${q(medium)}: supported values: "", "Memory", "HugePages", "HugePages-<size>"`,
    );
  }
  const limit = src.sizeLimit;
  if (limit === undefined || limit === null) return;
  const f = `${field}.sizeLimit`;
  const value = quantityValue(limit);
  if (value === undefined) {
    add(VolumeReason.InvalidSizeLimit, `${f}: Invalid value: ${q(limit)}: ${QUANTITY_MSG}`);
    return;
  }
  if (value < 0) {
    add(
      VolumeReason.InvalidSizeLimit,
      `${f}: Invalid value: ${q(limit)}: must be greater than or equal to 0`,
    );
    return;
  }
  if (value > MAX_SIZE_BYTES) {
    add(
      VolumeReason.InvalidSizeLimit,
      `${f}: Invalid value: ${q(limit)}: must be at most 2^63-1 bytes (about 8Ei)`,
    );
  }
}
