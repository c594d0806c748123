// hostPath's validation (k/k validateHostPathVolumeSource, plus the node's own
// refusals): a node agent fails just this volume, with the API server's wording.

import { hasBacksteps } from '../volumehost/paths.ts';
import { type Add, nulByteError, type Obj, q } from './util/field-errors.ts';

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
    add('InvalidPath', `${field}.path: Required value`);
  } else {
    // A relative path is admitted, as by the API server; the plugin resolves it
    // against / (kubelet's working directory under systemd and in a pod).
    if (hasBacksteps(p)) add('InvalidPath', `${field}.path: Invalid value: ${q(p)}: must not contain '..'`);
    for (const e of nulByteError(p, `${field}.path`)) add('InvalidPath', e.message, e.nodeOnly);
  }
  const t = src.type ?? '';
  if (typeof t !== 'string' || !HOST_PATH_TYPES.includes(t)) {
    add(
      'InvalidHostPathType',
      `${field}.type: Unsupported value: ${q(t)}: supported values: ${HOST_PATH_TYPES.map(q).join(', ')}`,
    );
  }
}
