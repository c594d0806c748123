// Static pod manifests: one file, any number of YAML documents (or one JSON
// object), each a v1 Pod. Turned into pods the way kubelet's file source does
// (k/k pkg/kubelet/config/common.go applyDefaults + tryDecodeSinglePod), then
// defaulted as the API server would. A bad document never stops the others.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { isObj, type Obj, q } from '../../plugins/util/field-errors.ts';
import { validateDNS1123Label, validateDNS1123Subdomain } from '../../plugins/util/names.ts';
import { validatePodVolumes } from '../../plugins/validation.ts';
import type { SourceReason } from '../../reasons.ts';
import { canonicalJSON } from '../volumemanager/reconciler.ts';
import { defaultPod } from './defaults.ts';
import type { SourceError } from './types.ts';

/** kubelet's maxConfigLength for a manifest file. */
export const MAX_MANIFEST_BYTES = 10 * 1024 * 1024;

export const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';
export const CONFIG_HASH_ANNOTATION = 'kubernetes.io/config.hash';

export interface ParsedManifest {
  pods: V1Pod[];
  errors: SourceError[];
}

/**
 * The UID of a static pod whose manifest sets no metadata.uid, as kubelet
 * derives it (pkg/kubelet/config/common.go applyDefaults): a hash of the whole
 * pod as read and defaulted, then of "host:<node>" and "file:<path>", as 32
 * hex digits. Every edit of the manifest makes a new pod, so the old one goes
 * away under the runtime contract's teardown rule and never has its volumes
 * changed under it. (kubelet hashes Go's internal object with MD5; podvol
 * hashes the canonical JSON of the defaulted pod with MD5, so the UIDs are
 * kubelet-shaped and change exactly when kubelet's do, but are not equal.)
 */
export function staticPodUID(defaulted: V1Pod, nodeName: string, file: string): string {
  return createHash('md5')
    .update(canonicalJSON(defaulted), 'utf8')
    .update(`host:${nodeName}`, 'utf8')
    .update(`file:${file}`, 'utf8')
    .digest('hex');
}

/** kubelet's generatePodName: static pods are suffixed so the name is unique across nodes. */
export function staticPodName(name: string, nodeName: string): string {
  return `${name}-${nodeName.toLowerCase()}`;
}

// The UID names the pod's directory (<root>/pods/<uid>), so it must be one
// harmless path element whatever the manifest says.
const SAFE_UID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function stringMapErrors(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!isObj(v)) return [`${field}: Invalid value: must be a map of string to string`];
  return (
    Object.entries(v)
      .filter(([, val]) => typeof val !== 'string')
      // The value itself is not echoed: annotations are where people put secrets.
      .map(
        ([k, val]) =>
          `${field}[${q(k)}]: Invalid value: a ${val === null ? 'null' : typeof val}: must be a string (quote it in YAML)`,
      )
  );
}

function containerErrors(spec: Obj): string[] {
  const errs: string[] = [];
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) {
    errs.push('spec.containers: Required value');
  }
  const names = new Set<string>();
  for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
    const cs = spec[list];
    if (cs === undefined || cs === null) continue;
    if (!Array.isArray(cs)) {
      errs.push(`spec.${list}: Invalid value: must be a list`);
      continue;
    }
    cs.forEach((c, i) => {
      const f = `spec.${list}[${i}]`;
      if (!isObj(c)) {
        errs.push(`${f}: Invalid value: must be an object`);
        return;
      }
      if (typeof c.name !== 'string' || c.name === '') errs.push(`${f}.name: Required value`);
      else {
        for (const e of validateDNS1123Label(c.name))
          errs.push(`${f}.name: Invalid value: ${q(c.name)}: ${e}`);
        if (names.has(c.name)) errs.push(`${f}.name: Duplicate value: ${q(c.name)}`);
        names.add(c.name);
      }
      if (typeof c.image !== 'string' || c.image.trim() === '') errs.push(`${f}.image: Required value`);
      for (const k of ['volumeMounts', 'volumeDevices']) {
        if (c[k] !== undefined && c[k] !== null && !Array.isArray(c[k]))
          errs.push(`${f}.${k}: Invalid value: must be a list`);
      }
    });
  }
  return errs;
}

/** Whole-pod problems that make a document unusable (per-volume ones are validate.ts's job). */
function podErrors(doc: Obj): string[] {
  const meta = doc.metadata;
  if (!isObj(meta)) return ['metadata: Required value'];
  const errs: string[] = [];
  if (typeof meta.name !== 'string' || meta.name === '')
    errs.push('metadata.name: Required value: name is needed for the pod');
  else
    for (const e of validateDNS1123Subdomain(meta.name))
      errs.push(`metadata.name: Invalid value: ${q(meta.name)}: ${e}`);
  if (meta.namespace !== undefined && meta.namespace !== null && meta.namespace !== '') {
    if (typeof meta.namespace !== 'string')
      errs.push(`metadata.namespace: Invalid value: ${q(meta.namespace)}: must be a string`);
    else
      for (const e of validateDNS1123Label(meta.namespace))
        errs.push(`metadata.namespace: Invalid value: ${q(meta.namespace)}: ${e}`);
  }
  if (meta.uid !== undefined && meta.uid !== null && meta.uid !== '') {
    if (typeof meta.uid !== 'string' || !SAFE_UID.test(meta.uid)) {
      errs.push(
        `metadata.uid: Invalid value: ${q(meta.uid)}: must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit (it names the pod's directory)`,
      );
    }
  }
  errs.push(
    ...stringMapErrors(meta.labels, 'metadata.labels'),
    ...stringMapErrors(meta.annotations, 'metadata.annotations'),
  );
  if (!isObj(doc.spec)) {
    errs.push('spec: Required value');
    return errs;
  }
  errs.push(...containerErrors(doc.spec));
  const vols = doc.spec.volumes;
  if (vols !== undefined && vols !== null && !Array.isArray(vols))
    errs.push('spec.volumes: Invalid value: must be a list');
  return errs;
}

// What kubelet's applyDefaults does to a pod read from a file.
function applyStaticDefaults(doc: Obj, nodeName: string, file: string): V1Pod {
  const pod = structuredClone(doc) as Obj & { metadata: Obj; spec: Obj };
  const meta = pod.metadata;
  const name = meta.name as string;
  const namespace = typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : 'default';
  const uid =
    typeof meta.uid === 'string' && meta.uid !== ''
      ? meta.uid
      : staticPodUID(defaultPod(doc as unknown as V1Pod), nodeName, file);
  meta.name = staticPodName(name, nodeName);
  meta.namespace = namespace;
  meta.uid = uid;
  meta.annotations = {
    ...(isObj(meta.annotations) ? meta.annotations : {}),
    [CONFIG_HASH_ANNOTATION]: uid,
    [CONFIG_SOURCE_ANNOTATION]: 'file',
  };
  pod.spec.nodeName = nodeName;
  // Static pods tolerate every NoExecute taint, so node problems never evict them.
  const tolerations = Array.isArray(pod.spec.tolerations) ? pod.spec.tolerations : [];
  const exists = tolerations.some(
    (t) => isObj(t) && t.operator === 'Exists' && t.effect === 'NoExecute' && !t.key && !t.value,
  );
  pod.spec.tolerations = exists ? tolerations : [...tolerations, { operator: 'Exists', effect: 'NoExecute' }];
  pod.status = { ...(isObj(pod.status) ? pod.status : {}), phase: 'Pending' };
  return defaultPod(pod as unknown as V1Pod);
}

interface Doc {
  index: number;
  value?: unknown;
  parseError?: string;
}

function firstLine(s: string): string {
  return s.split('\n')[0].trim().replace(/:$/, '');
}

// Strict JSON first for .json files and text that looks like JSON: its errors
// point at the right place. Everything else is YAML 1.1, which is what
// kubectl and kubelet (sigs.k8s.io/yaml) speak: `0644` is octal, `yes` is true.
function splitDocuments(text: string, file: string): Doc[] {
  const trimmed = text.trimStart();
  if (file.endsWith('.json') || trimmed.startsWith('{')) {
    try {
      return [{ index: 1, value: JSON.parse(text) }];
    } catch (err) {
      if (file.endsWith('.json')) {
        // V8 quotes a slice of the input after the comma; the document may hold secrets.
        const msg = (err as Error).message.replace(/,\s*(?:\.\.\.)?".*$/s, '');
        return [{ index: 1, parseError: `invalid JSON: ${firstLine(msg)}` }];
      }
    }
  }
  const parsed = parseAllDocuments(text, {
    version: '1.1',
    // Keep timestamps as strings: Go's YAML → JSON conversion does.
    customTags: (tags) =>
      tags.filter((t) =>
        typeof t === 'string' ? t !== 'timestamp' : t.tag !== 'tag:yaml.org,2002:timestamp',
      ),
  });
  // An empty stream is an empty array that may still carry stream-level errors.
  const streamErrors = (parsed as { errors?: { message: string }[] }).errors ?? [];
  if (parsed.length === 0 && streamErrors.length > 0) {
    return [{ index: 1, parseError: `invalid YAML: ${firstLine(streamErrors[0].message)}` }];
  }
  const docs = [...parsed];
  return docs.map((d, i) => {
    if (d.errors.length > 0)
      return { index: i + 1, parseError: `invalid YAML: ${firstLine(d.errors[0].message)}` };
    if (d.contents === null) return { index: i + 1 };
    try {
      return { index: i + 1, value: d.toJS({ maxAliasCount: 100 }) };
    } catch (err) {
      return { index: i + 1, parseError: `invalid YAML: ${firstLine((err as Error).message)}` };
    }
  });
}

/**
 * Every Pod document of a manifest file, static-pod defaulted for nodeName.
 * Never throws: each bad document becomes a SourceError (reasons ParseError,
 * NotAPod, InvalidPod, DuplicateUID, DuplicatePod) and the rest still count.
 */
export function parseManifestFile(text: string, file: string, nodeName: string): ParsedManifest {
  const pods: V1Pod[] = [];
  const errors: SourceError[] = [];
  const uids = new Set<string>();
  const names = new Set<string>();
  for (const doc of splitDocuments(text, file)) {
    const err = (reason: SourceReason, message: string, ns?: string, name?: string): void => {
      errors.push({
        source: 'file',
        file,
        document: doc.index,
        ...(ns !== undefined ? { namespace: ns } : {}),
        ...(name !== undefined ? { name } : {}),
        reason,
        message,
      });
    };
    if (doc.parseError !== undefined) {
      err('ParseError', doc.parseError);
      continue;
    }
    const v = doc.value;
    if (v === undefined || v === null) continue;
    if (!isObj(v)) {
      err('NotAPod', `document is ${Array.isArray(v) ? 'a list' : `a ${typeof v}`}, not a Pod object`);
      continue;
    }
    const meta = isObj(v.metadata) ? v.metadata : {};
    const name = typeof meta.name === 'string' ? meta.name : undefined;
    const ns = typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : 'default';
    if (v.kind !== 'Pod' || v.apiVersion !== 'v1') {
      const what =
        v.kind === undefined
          ? 'kind is missing'
          : v.kind !== 'Pod'
            ? `kind ${q(v.kind)}`
            : v.apiVersion === undefined
              ? 'apiVersion is missing'
              : `apiVersion ${q(v.apiVersion)}`;
      const hint =
        v.kind === 'PodList' || v.kind === 'List' ? ' (write one Pod per document, separated by ---)' : '';
      err('NotAPod', `${what}: only apiVersion "v1", kind "Pod" documents are static pods${hint}`, ns, name);
      continue;
    }
    const problems = podErrors(v);
    if (problems.length > 0) {
      err('InvalidPod', `invalid pod: ${problems.join('; ')}`, ns, name);
      continue;
    }
    const pod = applyStaticDefaults(v, nodeName, file);
    const finalName = pod.metadata?.name ?? '';
    const nameProblems = validateDNS1123Subdomain(finalName);
    if (nameProblems.length > 0) {
      err(
        'InvalidPod',
        `invalid pod: metadata.name: Invalid value: ${q(finalName)} (name-nodeName): ${nameProblems.join('; ')}`,
        ns,
        name,
      );
      continue;
    }
    // kubelet validates a decoded manifest whole (ValidatePodCreate): a pod with an
    // invalid volume is refused as a pod, so none of its volumes is ever set up.
    // Problems only a node refuses (a disabled plugin, a NUL byte) fail just that volume.
    const volumeProblems = [...validatePodVolumes(pod).values()].filter((p) => !p.nodeOnly);
    if (volumeProblems.length > 0) {
      err('InvalidPod', `invalid pod: ${volumeProblems.map((p) => p.message).join('; ')}`, ns, name);
      continue;
    }
    const uid = pod.metadata?.uid ?? '';
    if (uids.has(uid)) {
      err('DuplicateUID', `another document in this file already defines a pod with UID ${q(uid)}`, ns, name);
      continue;
    }
    if (names.has(`${ns}/${finalName}`)) {
      err('DuplicatePod', `another document in this file already defines pod ${ns}/${finalName}`, ns, name);
      continue;
    }
    uids.add(uid);
    names.add(`${ns}/${finalName}`);
    pods.push(pod);
  }
  return { pods, errors };
}
