// image's validation (k/k validateImageVolumeSource): a pod's image volume
// names a reference, and a pull policy the runtime knows.
import { type Add, type Obj, q } from './util/field-errors.ts';

const PULL_POLICIES = ['Always', 'IfNotPresent', 'Never'];

export function validateImageSource(src: Obj, field: string, add: Add): void {
  if (typeof src.reference !== 'string' || src.reference === '')
    add('InvalidField', `${field}.reference: Required value`);
  const policy = src.pullPolicy;
  if (policy === undefined || policy === null || policy === '') {
    add('InvalidField', `${field}.pullPolicy: Required value`);
  } else if (typeof policy !== 'string' || !PULL_POLICIES.includes(policy)) {
    add(
      'InvalidField',
      `${field}.pullPolicy: Unsupported value: ${q(policy)}: supported values: ${PULL_POLICIES.map(q).join(', ')}`,
    );
  }
}
