// ClusterTrustBundle access for projected volumes, after kubelet's
// pkg/kubelet/clustertrustbundle/clustertrustbundle_manager.go: find the newest
// certificates.k8s.io version that serves clustertrustbundles, keep every bundle in an
// informer (one list+watch, as kubelet's), then turn one named bundle, or every bundle of
// a signer matching a label selector, into a deduplicated PEM bundle. Normalized results
// are cached and dropped when the watch reports a change to a bundle they came from.

import { createHash } from 'node:crypto';
import {
  CertificatesApi,
  CertificatesV1Api,
  CertificatesV1alpha1Api,
  CertificatesV1beta1Api,
  KubernetesObjectApi,
  type V1LabelSelector,
  type V1ObjectMeta,
} from '@kubernetes/client-node';
import { systemClock } from '../../clock.ts';
import { errorMessage } from '../../errno.ts';
import { ownValue } from '../../own.ts';
import { ApiError } from '../errors.ts';
import type { TrustAnchorSource } from '../types.ts';
import { kubeErrorCode, toApiError } from './api-errors.ts';
import { type InformerOptions, informerTuning, Reflector } from './reflector.ts';
import { STANDALONE_TRUST_BUNDLE_ERROR } from './standalone.ts';

export interface TrustBundleManager extends TrustAnchorSource {
  /** Called with a bundle's name when the watch sees it added, changed or deleted. */
  onChange?(listener: (name: string) => void): () => void;
  stop?(): Promise<void>;
}

export interface TrustBundleManagerOptions extends InformerOptions {
  /** How long a normalized bundle is reused; entries are also dropped on watch events (kubelet: 5 min). */
  cacheTTLMs?: number;
  /** How long a lookup waits for the informer's first list before failing as kubelet does. */
  syncTimeoutMs?: number;
}

const GROUP = 'certificates.k8s.io';
// Newest first, like kubelet's ensureManagerSet.
const VERSIONS = ['v1', 'v1beta1', 'v1alpha1'] as const;
type CtbVersion = (typeof VERSIONS)[number];
const MAX_LABEL_SELECTOR_LENGTH = 100 * 1024;
const DEFAULT_CACHE_TTL_MS = 5 * 60 * 1000;
const DEFAULT_SYNC_TIMEOUT_MS = 10 * 1000;
const CACHE_MAX_ENTRIES = 1000;

export {
  createStandaloneTrustBundleManager,
  STANDALONE_TRUST_BUNDLE_ERROR,
} from './standalone.ts';

// --- label selectors (metav1.LabelSelectorAsSelector) -------------------------------------

interface Requirement {
  key: string;
  op: 'in' | 'notin' | 'exists' | '!' | '=';
  values: string[];
}

/**
 * Parsed selector: `null` means "match nothing" (a nil selector in the projection, as
 * kubelet treats it); an empty array means "match everything".
 */
export type ParsedLabelSelector = Requirement[] | null;

export function parseLabelSelector(sel: V1LabelSelector | undefined | null): ParsedLabelSelector {
  if (sel === undefined || sel === null) return null;
  const reqs: Requirement[] = [];
  for (const [key, value] of Object.entries(sel.matchLabels ?? {})) {
    reqs.push({ key, op: '=', values: [value] });
  }
  for (const expr of sel.matchExpressions ?? []) {
    const values = [...(expr.values ?? [])];
    switch (expr.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) {
          throw new Error("for 'in', 'notin' operators, values set can't be empty");
        }
        reqs.push({ key: expr.key, op: expr.operator === 'In' ? 'in' : 'notin', values: values.sort() });
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length !== 0) {
          throw new Error('values set must be empty for exists and does not exist');
        }
        reqs.push({ key: expr.key, op: expr.operator === 'Exists' ? 'exists' : '!', values: [] });
        break;
      default:
        throw new Error(`${JSON.stringify(expr.operator)} is not a valid label selector operator`);
    }
  }
  // labels.Selector.String() orders requirements by key.
  return reqs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** The query-string form, as labels.Selector.String() prints it. */
export function labelSelectorString(reqs: Requirement[]): string {
  return reqs
    .map((r) => {
      switch (r.op) {
        case '=':
          return `${r.key}=${r.values[0]}`;
        case 'in':
        case 'notin':
          return `${r.key} ${r.op} (${r.values.join(',')})`;
        case 'exists':
          return r.key;
        case '!':
          return `!${r.key}`;
      }
      return '';
    })
    .join(',');
}

export function labelsMatch(reqs: ParsedLabelSelector, labels: Record<string, string> | undefined): boolean {
  if (reqs === null) return false;
  const l = labels ?? {};
  return reqs.every((r) => {
    const value = ownValue(l, r.key);
    const has = value !== undefined;
    switch (r.op) {
      case '=':
        return has && value === r.values[0];
      case 'in':
        return has && r.values.includes(value);
      case 'notin':
        return !has || !r.values.includes(value);
      case 'exists':
        return has;
      case '!':
        return !has;
    }
    return false;
  });
}

// --- PEM normalization ------------------------------------------------------------------

const PEM_BLOCK = /-----BEGIN ([^\n]*?)-----\r?\n([\s\S]*?)-----END \1-----/g;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The DER payloads of every well-formed PEM block, like repeated Go pem.Decode calls. */
export function pemBlocks(text: string): Buffer[] {
  const out: Buffer[] = [];
  for (const m of text.matchAll(PEM_BLOCK)) {
    let lines = (m[2] ?? '').split(/\r?\n/);
    // RFC 1421 headers ("Proc-Type: ...") end at the first blank line; they are not payload.
    if (lines[0]?.includes(':')) {
      const blank = lines.findIndex((line) => line.trim() === '');
      lines = blank === -1 ? [] : lines.slice(blank + 1);
    }
    const b64 = lines.join('').replace(/[ \t\r]/g, '');
    if (b64.length % 4 !== 0 || !BASE64.test(b64)) continue;
    out.push(Buffer.from(b64, 'base64'));
  }
  return out;
}

function encodeCertificate(der: Buffer): string {
  const b64 = der.toString('base64');
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.map((l) => `${l}\n`).join('')}-----END CERTIFICATE-----\n`;
}

/**
 * Deduplicate certificates across bundles by their DER bytes and re-encode them as
 * CERTIFICATE blocks. kubelet sorts the set and then shuffles it, so the order differs
 * between kubelet restarts (nobody should depend on it) yet is stable while running; we
 * get the same property by ordering on a keyed hash, which additionally keeps the relative
 * order of unchanged certificates when one is added, so files are not rewritten needlessly.
 */
export function normalizeTrustAnchors(bundles: string[], orderSeed: string): string {
  const unique = new Map<string, Buffer>();
  for (const bundle of bundles) {
    for (const der of pemBlocks(bundle)) unique.set(der.toString('base64'), der);
  }
  const rank = (der: Buffer): string => createHash('sha256').update(orderSeed).update(der).digest('hex');
  return [...unique.values()]
    .map((der) => ({ der, rank: rank(der) }))
    .sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : Buffer.compare(a.der, b.der)))
    .map((e) => encodeCertificate(e.der))
    .join('');
}

// --- manager ---------------------------------------------------------------------------

interface CTB {
  metadata?: V1ObjectMeta;
  spec?: { signerName?: string; trustBundle?: string };
}

export function createTrustBundleManager(opts: TrustBundleManagerOptions): TrustBundleManager {
  const { kubeConfig, logger } = opts;
  const clock = opts.clock ?? systemClock();
  const now = () => clock.now();
  const cacheTTLMs = opts.cacheTTLMs ?? DEFAULT_CACHE_TTL_MS;
  const syncTimeoutMs = opts.syncTimeoutMs ?? DEFAULT_SYNC_TIMEOUT_MS;
  // Seeds the per-process certificate order (see normalizeTrustAnchors).
  const orderSeed = clock.random().toString();
  const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  // kubelet's normalizationCache, keyed by bundle name or by signer + selector.
  const cache = new Map<string, { value: string; expiresAt: number; name?: string; signer?: string }>();
  const listeners = new Set<(name: string) => void>();
  // A found version is kept for the process lifetime (kubelet never re-discovers); "none
  // served" is re-checked after a while so enabling the API later is picked up.
  let version: CtbVersion | undefined;
  let noneUntil = 0;
  let discovering: Promise<CtbVersion | undefined> | undefined;
  let informer: Reflector<CTB> | undefined;

  const resourcesServed = async (v: CtbVersion): Promise<boolean> => {
    const api =
      v === 'v1'
        ? kubeConfig.makeApiClient(CertificatesV1Api)
        : v === 'v1beta1'
          ? kubeConfig.makeApiClient(CertificatesV1beta1Api)
          : kubeConfig.makeApiClient(CertificatesV1alpha1Api);
    try {
      const list = await api.getAPIResources();
      return list.resources.some((r) => r.name === 'clustertrustbundles');
    } catch (err) {
      if (kubeErrorCode(err) === 404) return false;
      throw err;
    }
  };

  const discover = async (): Promise<CtbVersion | undefined> => {
    let served: string[];
    try {
      const group = await kubeConfig.makeApiClient(CertificatesApi).getAPIGroup();
      served = group.versions.map((v) => v.version);
    } catch (err) {
      if (kubeErrorCode(err) === 404) return undefined;
      throw err;
    }
    for (const v of VERSIONS) {
      if (served.includes(v) && (await resourcesServed(v))) return v;
    }
    return undefined;
  };

  const ensureVersion = async (): Promise<CtbVersion> => {
    if (version) return version;
    if (now() < noneUntil) throw new ApiError('StandaloneMode', STANDALONE_TRUST_BUNDLE_ERROR);
    discovering ??= discover().finally(() => {
      discovering = undefined;
    });
    let found: CtbVersion | undefined;
    try {
      found = await discovering;
    } catch (err) {
      throw toApiError(
        err,
        'failed to ensure informer manager for ClusterTrustBundles: ' +
          'failed to determine which informer manager to choose: ',
      );
    }
    if (!found) {
      if (noneUntil === 0) {
        logger?.info({}, 'No version of the ClusterTrustBundle API was found');
      }
      noneUntil = now() + DEFAULT_SYNC_TIMEOUT_MS * 3;
      throw new ApiError('StandaloneMode', STANDALONE_TRUST_BUNDLE_ERROR);
    }
    if (!version) logger?.info({ apiGroup: `${GROUP}/${found}` }, 'Using ClusterTrustBundle API');
    version = found;
    return found;
  };

  /** kubelet's dropCacheFor: entries for the bundle's name, and for its signer when it has one. */
  const dropCacheFor = (ctb: CTB | undefined) => {
    if (!ctb) return;
    const name = ctb.metadata?.name;
    const signer = ctb.spec?.signerName;
    for (const [key, entry] of cache) {
      if ((name && entry.name === name) || (signer && entry.signer === signer)) cache.delete(key);
    }
  };

  /** The informer on every ClusterTrustBundle of the served version, started on first use. */
  const ensureInformer = async (v: CtbVersion): Promise<Reflector<CTB>> => {
    if (!informer) {
      const r = new Reflector<CTB>({
        ...informerTuning({ ...opts, clock }),
        name: 'clustertrustbundles',
        watchPath: `/apis/${GROUP}/${v}/clustertrustbundles`,
        list: (o) =>
          objects.list<CTB & { metadata: { name: string } }>(
            `${GROUP}/${v}`,
            'ClusterTrustBundle',
            undefined,
            undefined,
            undefined,
            undefined,
            o.fieldSelector,
            o.labelSelector,
          ),
        // Bundles are cluster-scoped and looked up by name.
        keyOf: (o) => o.metadata?.name ?? '',
      });
      r.onEvent((e) => {
        dropCacheFor(e.object);
        dropCacheFor(e.old);
        const name = e.object.metadata?.name ?? '';
        for (const l of listeners) {
          try {
            l(name);
          } catch (err) {
            logger?.error({ err: errorMessage(err) }, 'trust bundle listener threw');
          }
        }
      });
      informer = r;
      void r.start();
    }
    if (!informer.hasSynced() && !(await informer.waitForSync(syncTimeoutMs))) {
      const cause = informer.lastError?.message;
      throw new Error(`ClusterTrustBundle informer has not yet synced${cause ? `: ${cause}` : ''}`);
    }
    return informer;
  };

  const cached = (key: string): string | undefined => {
    const hit = cache.get(key);
    if (!hit) return undefined;
    if (now() >= hit.expiresAt) {
      cache.delete(key);
      return undefined;
    }
    return hit.value;
  };

  const remember = (key: string, value: string, tag: { name?: string; signer?: string }): void => {
    if (cache.size >= CACHE_MAX_ENTRIES) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) cache.delete(oldest);
    }
    cache.set(key, { value, expiresAt: now() + cacheTTLMs, ...tag });
  };

  return {
    async getTrustAnchorsByName(name, allowMissing) {
      const store = await ensureInformer(await ensureVersion());
      const key = `name\u0000${name}`;
      const hit = cached(key);
      if (hit !== undefined) return hit;
      const ctb = store.get(name);
      if (!ctb) {
        if (allowMissing) return '';
        // The lister's NotFound, as kubelet words it.
        throw new ApiError(
          'NotFound',
          `while getting ClusterTrustBundle: clustertrustbundle.${GROUP} ${JSON.stringify(name)} not found`,
        );
      }
      const pem = normalizeTrustAnchors([ctb.spec?.trustBundle ?? ''], orderSeed);
      remember(key, pem, { name });
      return pem;
    },

    async getTrustAnchorsBySigner(signerName, labelSelector, allowMissing) {
      const store = await ensureInformer(await ensureVersion());
      let reqs: ParsedLabelSelector;
      try {
        reqs = parseLabelSelector(labelSelector);
      } catch (err) {
        throw new Error(`while parsing label selector: ${errorMessage(err)}`);
      }
      const selector = reqs === null ? '' : labelSelectorString(reqs);
      if (selector.length > MAX_LABEL_SELECTOR_LENGTH) {
        throw new Error(
          `label selector length (${selector.length}) is larger than ${MAX_LABEL_SELECTOR_LENGTH}`,
        );
      }
      const key = `signer\u0000${signerName}\u0000${reqs === null ? '\u0000nothing' : selector}`;
      const hit = cached(key);
      if (hit !== undefined) return hit;
      // A nil selector matches nothing.
      const matching = store
        .list()
        .filter((ctb) => ctb.spec?.signerName === signerName && labelsMatch(reqs, ctb.metadata?.labels));
      if (matching.length === 0) {
        if (allowMissing) return '';
        throw new Error('combination of signerName and labelSelector matched zero ClusterTrustBundles');
      }
      const pem = normalizeTrustAnchors(
        matching.map((ctb) => ctb.spec?.trustBundle ?? ''),
        orderSeed,
      );
      remember(key, pem, { signer: signerName });
      return pem;
    },

    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async stop() {
      await informer?.stop();
    },
  };
}
