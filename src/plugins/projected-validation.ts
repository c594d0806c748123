// projected's validation: exactly one projection per source, and no two
// projections writing the same path.
import { checkDownwardItems } from './downwardapi-validation.ts';
import {
  type Add,
  checkKeyToPaths,
  isObj,
  modeError,
  notePath,
  type Obj,
  ProjectedPaths,
  payloadPathErrors,
  q,
} from './util/field-errors.ts';

const MIN_TOKEN_EXPIRATION_SECONDS = 600;
const MAX_TOKEN_EXPIRATION_SECONDS = 2 ** 32;

const PROJECTION_FIELDS = [
  'clusterTrustBundle',
  'configMap',
  'downwardAPI',
  'podCertificate',
  'secret',
  'serviceAccountToken',
];

export function validateProjectedSource(src: Obj, field: string, add: Add): void {
  const me = modeError(src.defaultMode, `${field}.defaultMode`);
  if (me) add('InvalidMode', me);
  const sources = src.sources ?? [];
  if (!Array.isArray(sources)) {
    add('InvalidField', `${field}.sources: Invalid value: must be a list`);
    return;
  }
  const paths = new ProjectedPaths(field);
  sources.forEach((s, i) => {
    const f = `${field}.sources[${i}]`;
    if (!isObj(s)) {
      add('InvalidField', `${f}: Invalid value: must be an object`);
      return;
    }
    const set = Object.keys(s).filter((k) => s[k] !== null && s[k] !== undefined);
    const unknown = set.filter((k) => !PROJECTION_FIELDS.includes(k));
    if (unknown.length > 0) {
      add(
        'UnknownVolumeSource',
        `${f}: Invalid value: unknown projection field(s) ${unknown.map(q).join(', ')}`,
      );
      return;
    }
    const [kind] = set;
    if (kind === undefined || set.length !== 1) {
      add(
        'UnknownVolumeSource',
        set.length === 0
          ? `${f}: Required value: must specify exactly one projection type`
          : `${f}: Forbidden: may not specify more than 1 projection type (found ${set.map(q).join(', ')})`,
      );
      return;
    }
    const p = s[kind];
    const pf = `${f}.${kind}`;
    if (!isObj(p)) {
      add('InvalidField', `${pf}: Invalid value: must be an object`);
      return;
    }
    if (kind === 'secret' || kind === 'configMap') checkKeyToPaths(p.items, `${pf}.items`, add, paths);
    if (kind === 'downwardAPI') checkDownwardItems(p.items, `${pf}.items`, add, paths);
    if (kind === 'serviceAccountToken' || kind === 'clusterTrustBundle') {
      for (const e of payloadPathErrors(p.path, `${pf}.path`)) add('InvalidPath', e.message, e.nodeOnly);
      // Upstream checks a token path against no other path (validateProjectionSources).
      if (kind === 'clusterTrustBundle') notePath(p.path, pf, add, paths);
    }
    if (kind === 'serviceAccountToken' && p.expirationSeconds !== undefined && p.expirationSeconds !== null) {
      const e = p.expirationSeconds;
      const ef = `${pf}.expirationSeconds`;
      if (typeof e !== 'number' || !Number.isInteger(e)) {
        add('InvalidField', `${ef}: Invalid value: ${q(e)}: must be an integer number of seconds`);
      } else if (e < MIN_TOKEN_EXPIRATION_SECONDS) {
        add('InvalidField', `${ef}: Invalid value: ${e}: may not specify a duration less than 10 minutes`);
      } else if (e > MAX_TOKEN_EXPIRATION_SECONDS) {
        add(
          'InvalidField',
          `${ef}: Invalid value: ${e}: may not specify a duration larger than 2^32 seconds`,
        );
      }
    }
  });
}
