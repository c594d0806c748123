// hostPath's validation (k/k validateHostPathVolumeSource, plus the node's own
// refusals): a node agent fails just this volume, with the API server's wording.
import { type Add, type Obj, q, VolumeReason } from './util/field-errors.ts';

const HOST_PATH_TYPES = [
  '',
  'BlockDevice',
  'CharDevice',
  'Directory',
  'DirectoryOrCreate',
  'File',
  'FileOrCreate',
  'Socket',
];

export function validateHostPathSource(src: Obj, field: string, add: Add): void {
  const p = src.path;
  if (typeof p !== 'string' || p === '') {
    add(VolumeReason.InvalidPath, `${field}.path: Required value`);
  } else {
    // The API server accepts a relative path; on a node agent it would resolve
    // against the daemon's working directory, so it is refused here.
    if (!p.startsWith('/'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must be an absolute path`);
    if (p.split('/').includes('..'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must not contain '..'`);
    if (p.includes('\0'))
      add(VolumeReason.InvalidPath, `${field}.path: Invalid value: ${q(p)}: must not contain a NUL byte`);
  }
  const t = src.type ?? '';
  if (typeof t !== 'string' || !HOST_PATH_TYPES.includes(t)) {
    add(
      VolumeReason.InvalidHostPathType,
      `${field}.type: Unsupported value: ${q(t)}: supported values: ${HOST_PATH_TYPES.map(q).join(', ')}`,
    );
  }
}
