// Static pod manifests: one file, any number of YAML documents (or one JSON
// object), each a v1 Pod. Turned into pods the way kubelet's file source does
// (k/k pkg/kubelet/config/common.go applyDefaults + tryDecodeSinglePod), then
// defaulted as the API server would. A bad document never stops the others.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { Composer, Lexer, Parser, type YAMLError } from 'yaml';
import { errorMessage } from '../../errno.ts';
import { isObj, type Obj, q } from '../../plugins/util/field-errors.ts';
import { validateDNS1123Label, validateDNS1123Subdomain } from '../../plugins/util/names.ts';
import { tooManyVolumes, validatePodVolumes } from '../../plugins/validation.ts';
import type { SourceReason } from '../../reasons.ts';
import { canonicalJSON } from '../canonical-json.ts';
import { defaultPod, defaultPodDocument, podFromDocument } from './defaults.ts';
import { CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION, type SourceError } from './types.ts';

/** kubelet's maxConfigLength for a manifest file. */
export const MAX_MANIFEST_BYTES = 10 * 1024 * 1024;
/**
 * The largest manifest document podvol parses: etcd's default request limit
 * (1.5 MiB), so no pod larger than this exists in any cluster. Parsing YAML
 * costs many times its size in memory; this bounds what one document costs.
 */
export const MAX_DOCUMENT_BYTES = 1.5 * 1024 * 1024;
/**
 * The deepest nesting of maps and lists a manifest document may have. The
 * deepest pod field (affinity's matchExpressions values) is 11 levels down;
 * a 400 KB document of nested lists cost 470 MB to parse (issue 15, finding 5).
 */
export const MAX_NESTING_DEPTH = 64;
/**
 * The most documents one manifest file may hold. kubelet reads one pod per
 * file; podvol reads a stream, so the benches' 667-pod file works. What this
 * bounds is the per-document cost, which the byte limits do not: 10 MiB holds
 * 2.6 million empty documents (a scan of them stalled the event loop for
 * 13.9 s, issue 21 finding 6). Measured on 2 loaded cores (parseManifestFile,
 * 3 runs): 1,000 documents cost 12-52 ms empty, 28-78 ms of `{}`, 190-250 ms
 * of broken YAML, 1.0-1.4 s as YAML pods and 0.14-0.32 s as a JSON stream of
 * pods; 10,000 cost 0.16-0.26 s empty, 4-5.7 s broken and 14-16 s as YAML pods.
 */
export const MAX_DOCUMENTS = 1000;

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

/** Whole-pod problems that make a document unusable (per-volume ones are plugins/validation.ts's job). */
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
  // Appended one by one: a document of 130,000 bad labels spread into push() overflowed the stack.
  for (const e of stringMapErrors(meta.labels, 'metadata.labels')) errs.push(e);
  for (const e of stringMapErrors(meta.annotations, 'metadata.annotations')) errs.push(e);
  if (!isObj(doc.spec)) {
    errs.push('spec: Required value');
    return errs;
  }
  for (const e of containerErrors(doc.spec)) errs.push(e);
  const vols = doc.spec.volumes;
  if (vols !== undefined && vols !== null && !Array.isArray(vols))
    errs.push('spec.volumes: Invalid value: must be a list');
  return errs;
}

// What kubelet's applyDefaults does to a pod read from a file. The document is
// copied once more only when the UID is computed from its defaulted form
// (three structuredClones per pod were a fifth of a restart with 667 static
// pods, P5); the fields set here come first, as before, and defaulting reads none of them.
function applyStaticDefaults(doc: Obj, nodeName: string, file: string): V1Pod {
  const pod = structuredClone(doc);
  // podErrors accepted doc: metadata and spec are objects and metadata.name a string.
  const meta: Obj = isObj(pod.metadata) ? pod.metadata : {};
  const spec: Obj = isObj(pod.spec) ? pod.spec : {};
  pod.metadata = meta;
  pod.spec = spec;
  const name = typeof meta.name === 'string' ? meta.name : '';
  const namespace = typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : 'default';
  const uid =
    typeof meta.uid === 'string' && meta.uid !== ''
      ? meta.uid
      : staticPodUID(defaultPod(podFromDocument(doc)), nodeName, file);
  meta.name = staticPodName(name, nodeName);
  meta.namespace = namespace;
  meta.uid = uid;
  meta.annotations = {
    ...(isObj(meta.annotations) ? meta.annotations : {}),
    [CONFIG_HASH_ANNOTATION]: uid,
    [CONFIG_SOURCE_ANNOTATION]: 'file',
  };
  spec.nodeName = nodeName;
  // Static pods tolerate every NoExecute taint, so node problems never evict them.
  const tolerations = Array.isArray(spec.tolerations) ? spec.tolerations : [];
  const exists = tolerations.some(
    (t) => isObj(t) && t.operator === 'Exists' && t.effect === 'NoExecute' && !t.key && !t.value,
  );
  spec.tolerations = exists ? tolerations : [...tolerations, { operator: 'Exists', effect: 'NoExecute' }];
  pod.status = { ...(isObj(pod.status) ? pod.status : {}), phase: 'Pending' };
  defaultPodDocument(pod);
  return podFromDocument(pod);
}

/** How many of a pod's field errors its message names; the rest are counted. */
const LISTED_PROBLEMS = 32;

/** `a; b; c`, or the first LISTED_PROBLEMS and how many more: one document's message stays small. */
function problemList(problems: readonly string[]): string {
  if (problems.length <= LISTED_PROBLEMS) return problems.join('; ');
  return `${problems.slice(0, LISTED_PROBLEMS).join('; ')}; and ${problems.length - LISTED_PROBLEMS} more`;
}

interface Doc {
  index: number;
  value?: unknown;
  /** Why the document is refused before it is a value (ParseError, DocumentTooLarge, TooDeeplyNested). */
  refused?: { reason: SourceReason; message: string };
}

/** A file with more than MAX_DOCUMENTS documents: refused whole, nothing of it is read. */
const TOO_MANY = 'too-many';

function firstLine(s: string): string {
  return (s.split('\n')[0] ?? '').trim().replace(/:$/, '');
}

const parseError = (index: number, message: string): Doc => ({
  index,
  refused: { reason: 'ParseError', message },
});

const tooLarge = (index: number): Doc => ({
  index,
  refused: {
    reason: 'DocumentTooLarge',
    message: `document is larger than the limit of ${MAX_DOCUMENT_BYTES} bytes`,
  },
});

const tooDeep = (index: number): Doc => ({
  index,
  refused: {
    reason: 'TooDeeplyNested',
    message: `document nests maps and lists deeper than the limit of ${MAX_NESTING_DEPTH} levels`,
  },
});

/** How deep JSON text nests objects and arrays, counted without parsing it; stops past `max`. */
function jsonDepth(text: string, max: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      deepest = Math.max(deepest, depth);
      if (deepest > max) return deepest;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

class LimitExceeded extends Error {
  readonly kind: 'size' | 'depth' | 'count';
  constructor(kind: 'size' | 'depth' | 'count') {
    super(kind);
    this.kind = kind;
  }
}

const COLLECTIONS: ReadonlySet<string> = new Set(['block-map', 'block-seq', 'flow-collection']);

/**
 * yaml's parser, one lexical token at a time, refusing a document that grows
 * past MAX_DOCUMENT_BYTES or nests deeper than MAX_NESTING_DEPTH while it is
 * read: the limit is hit before the document's tree is built, so a hostile
 * document costs what its first MAX_NESTING_DEPTH levels cost.
 */
function* limitedTokens(parser: Parser, text: string) {
  for (const lexeme of new Lexer().lex(text, false)) {
    yield* parser.next(lexeme);
    const stack = parser.stack;
    const doc = stack[0];
    if (doc?.type === 'document' && parser.offset - doc.offset > MAX_DOCUMENT_BYTES)
      throw new LimitExceeded('size');
    // The stack holds the document and a scalar or two besides the collections.
    if (
      stack.length > MAX_NESTING_DEPTH &&
      stack.filter((t) => COLLECTIONS.has(t.type)).length > MAX_NESTING_DEPTH
    )
      throw new LimitExceeded('depth');
  }
  yield* parser.end();
}

/**
 * Line numbers of offsets in `text`, asked in increasing order (as a stream's
 * errors come): counting resumes where the last answer stopped, so a file of
 * many broken documents costs one pass, not one pass per error.
 */
function lineCounter(text: string): (at: number) => { line: number; lineStart: number } {
  let line = 1;
  let lineStart = 0;
  return (at) => {
    if (at < lineStart) {
      line = 1;
      lineStart = 0;
    }
    for (let i = text.indexOf('\n', lineStart); i !== -1 && i < at; i = text.indexOf('\n', i + 1)) {
      line++;
      lineStart = i + 1;
    }
    return { line, lineStart };
  };
}

/**
 * A YAML error's first line and where it is (`at line L, column C`, as yaml's
 * prettyErrors says), never the source line itself: it may hold a secret.
 */
function yamlError(err: YAMLError, start: number, lineOf: ReturnType<typeof lineCounter>): string {
  const msg = `invalid YAML: ${firstLine(err.message)}`;
  if (err.pos[0] < 0) return msg;
  const at = start + err.pos[0];
  const { line, lineStart } = lineOf(at);
  return `${msg} at line ${line}, column ${at - lineStart + 1}`;
}

/** The first line at or after `offset` that starts a new document (`---`), or -1. */
function nextDocumentStart(text: string, offset: number): number {
  const re = /^---(?:[ \t\r\n]|$)/gm;
  re.lastIndex = offset;
  // A match at `offset` itself is the refused document's own marker.
  for (let m = re.exec(text); m !== null; m = re.exec(text)) if (m.index > offset) return m.index;
  return -1;
}

/** Whether `text` has more than `max` lines that start a document (`---`), counted without parsing. */
function moreMarkersThan(text: string, max: number): boolean {
  const re = /^---(?:[ \t\r\n]|$)/gm;
  let n = 0;
  while (re.exec(text) !== null) if (++n > max) return true;
  return false;
}

/** A line that is only a document marker, after a first document. */
const DOCUMENT_MARKER_LINE = /\n---[ \t]*(?:\r?\n|$)/;

/**
 * A stream of JSON objects separated by `---` lines (what generators and the
 * benches write) is parsed with JSON.parse, document by document, as a file
 * that is one JSON document already is: 667 pods take 60 ms this way where
 * the YAML parser took 1.8–5.4 s at start-up (P5 in the README). Only when
 * every document is a JSON object within the limits: anything else (a
 * comment, an empty document, YAML, a JSON error, a document too large or
 * too deep) returns undefined and the whole stream goes through the YAML
 * parser, so its errors and document numbers are YAML's.
 */
function jsonStream(text: string): Doc[] | undefined {
  const out: Doc[] = [];
  for (const part of text.split(DOCUMENT_MARKER_LINE)) {
    const doc = part.trim();
    if (!doc.startsWith('{') || doc.length > MAX_DOCUMENT_BYTES) return undefined;
    if (jsonDepth(doc, MAX_NESTING_DEPTH) > MAX_NESTING_DEPTH) return undefined;
    try {
      out.push({ index: out.length + 1, value: JSON.parse(doc) });
    } catch {
      return undefined;
    }
  }
  return out;
}

// Strict JSON first for .json files and text that looks like JSON: its errors
// point at the right place. Everything else is YAML 1.1, which is what
// kubectl and kubelet (sigs.k8s.io/yaml) speak: `0644` is octal, `yes` is true.
function splitDocuments(text: string, file: string): Doc[] | typeof TOO_MANY {
  const trimmed = text.trimStart();
  const stream = DOCUMENT_MARKER_LINE.test(text);
  // Every such line starts a document: a file with too many is refused before any is parsed.
  // (A first document without a marker, or one after `...`, is caught while parsing below.)
  if (!file.endsWith('.json') && moreMarkersThan(text, MAX_DOCUMENTS)) return TOO_MANY;
  if (stream && !file.endsWith('.json')) {
    const docs = jsonStream(text);
    if (docs) return docs.length > MAX_DOCUMENTS ? TOO_MANY : docs;
  }
  // A stream's limits are per document, checked by limitedTokens below: the
  // whole stream is never refused as one document that is too large.
  if (file.endsWith('.json') || (trimmed.startsWith('{') && !stream)) {
    // One JSON document: its limits are checked before JSON.parse builds anything.
    if (text.length > MAX_DOCUMENT_BYTES) return [tooLarge(1)];
    if (jsonDepth(text, MAX_NESTING_DEPTH) > MAX_NESTING_DEPTH) return [tooDeep(1)];
    try {
      return [{ index: 1, value: JSON.parse(text) }];
    } catch (err) {
      if (file.endsWith('.json')) {
        // V8 quotes a slice of the input after the comma; the document may hold secrets.
        const msg = errorMessage(err).replace(/,\s*(?:\.\.\.)?".*$/s, '');
        return [parseError(1, `invalid JSON: ${firstLine(msg)}`)];
      }
    }
  }
  const out: Doc[] = [];
  const lineOf = lineCounter(text);
  let start = 0;
  while (start !== -1) {
    const rest = start === 0 ? text : text.slice(start);
    const parser = new Parser();
    const composer = new Composer({
      version: '1.1',
      // Keep timestamps as strings: Go's YAML → JSON conversion does.
      customTags: (tags) =>
        tags.filter((t) =>
          typeof t === 'string' ? t !== 'timestamp' : t.tag !== 'tag:yaml.org,2002:timestamp',
        ),
    });
    const before = out.length;
    const add = (d: ReturnType<Composer['end']> extends Generator<infer D> ? D : never) => {
      const index = out.length + 1;
      if (index > MAX_DOCUMENTS) throw new LimitExceeded('count');
      const [error] = d.errors;
      if (error) out.push(parseError(index, yamlError(error, start, lineOf)));
      else if (d.contents === null) out.push({ index });
      else {
        try {
          out.push({ index, value: d.toJS({ maxAliasCount: 100 }) });
        } catch (err) {
          out.push(parseError(index, `invalid YAML: ${firstLine(errorMessage(err))}`));
        }
      }
    };
    try {
      for (const d of composer.compose(limitedTokens(parser, rest), true, rest.length)) add(d);
      // An empty stream yields no document but may still carry stream-level errors.
      const [streamError] = composer.streamInfo().errors;
      if (out.length === before && streamError)
        out.push(parseError(out.length + 1, yamlError(streamError, start, lineOf)));
      return out;
    } catch (err) {
      if (!(err instanceof LimitExceeded)) throw err;
      if (err.kind === 'count') return TOO_MANY;
      // The documents before the refused one count (the composer still holds the
      // last of them); parsing resumes at the next `---`.
      try {
        for (const d of composer.end()) add(d);
      } catch (e) {
        if (e instanceof LimitExceeded && e.kind === 'count') return TOO_MANY;
        throw e;
      }
      const index = out.length + 1;
      out.push(err.kind === 'size' ? tooLarge(index) : tooDeep(index));
      const refusedAt = start + (parser.stack[0]?.offset ?? 0);
      start = nextDocumentStart(text, Math.max(refusedAt, start));
    }
  }
  return out;
}

/**
 * Every Pod document of a manifest file, static-pod defaulted for nodeName.
 * Never throws: each bad document becomes a SourceError (reasons ParseError,
 * NotAPod, InvalidPod, DuplicateUID, DuplicatePod) and the rest still count.
 * Two errors are the whole file's: more than MAX_DOCUMENTS documents
 * (TooManyDocuments), and no document at all (EmptyManifest: an empty file,
 * or only comments and markers), which kubelet refuses too ("couldn't parse
 * as pod"). The second matters most: a manifest caught between a writer's
 * truncate and its write reads empty, and an error keeps the pods it defined.
 */
export function parseManifestFile(text: string, file: string, nodeName: string): ParsedManifest {
  const pods: V1Pod[] = [];
  const errors: SourceError[] = [];
  const uids = new Set<string>();
  const names = new Set<string>();
  const docs = splitDocuments(text, file);
  if (docs === TOO_MANY) {
    const message = `manifest has more than ${MAX_DOCUMENTS} documents (kubelet reads one pod per file); none of them is read`;
    return { pods, errors: [{ source: 'file', file, reason: 'TooManyDocuments', message }] };
  }
  let empty = true;
  for (const doc of docs) {
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
    if (doc.refused !== undefined) {
      err(doc.refused.reason, doc.refused.message);
      empty = false;
      continue;
    }
    const v = doc.value;
    if (v === undefined || v === null) continue;
    empty = false;
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
      err('InvalidPod', `invalid pod: ${problemList(problems)}`, ns, name);
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
    const tooMany = tooManyVolumes(pod);
    if (tooMany) {
      err('TooManyVolumes', `invalid pod: ${tooMany.message}`, ns, name);
      continue;
    }
    const volumeProblems = [...validatePodVolumes(pod).values()].filter((p) => !p.nodeOnly);
    if (volumeProblems.length > 0) {
      err('InvalidPod', `invalid pod: ${problemList(volumeProblems.map((p) => p.message))}`, ns, name);
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
  if (empty) {
    const message = 'manifest holds no document (it is empty, or only comments): no pod is read from it';
    errors.push({ source: 'file', file, reason: 'EmptyManifest', message });
  }
  return { pods, errors };
}
