// `podvol status`: asks a running podvol for /status and formats it the way
// kubectl prints resources (src/cli/status.ts prints it). Talking to the
// daemon is the only I/O here; the table itself is built by a pure function
// so tests can pin it exactly.

import { errorMessage, fieldOf } from '../../errno.ts';
import type { SourceError } from '../pods/types.ts';
import type { PodStatus } from '../volumemanager/status.ts';
import { formatTable } from './table.ts';

export const DEFAULT_SERVER = 'http://127.0.0.1:10280';
export const STATUS_TIMEOUT_MS = 10_000;

export type StatusFormat = 'table' | 'wide' | 'json';
export const statusFormats: readonly StatusFormat[] = ['table', 'wide', 'json'];

/** /status's teardownHold (src/agent/daemon.ts): the settle guard holds a first-sync teardown. */
export interface TeardownHoldStatus {
  since: string;
  until: string;
  volumes: number;
  adopted: number;
  message: string;
}

/** The /status document the daemon serves (src/agent/daemon.ts). */
export interface StatusDocument {
  node: string;
  pods: PodStatus[];
  errors: SourceError[];
  teardownHold?: TeardownHoldStatus;
}

/**
 * The server URL as given, with `http://` assumed when no scheme is written and
 * no trailing slash. Throws a message fit for a usage error.
 */
export function normalizeServer(value: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new Error(`invalid server URL "${value}": want e.g. ${DEFAULT_SERVER}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`invalid server URL "${value}": only http and https are supported`);
  }
  if (url.search || url.hash)
    throw new Error(`invalid server URL "${value}": must not have a query or fragment`);
  return url.href.replace(/\/+$/, '');
}

export type FetchResult = { ok: true; body: string; doc: StatusDocument } | { ok: false; message: string };

// fetch() hides the socket error in `cause`; that is the part worth showing.
function unreachableReason(err: unknown): string {
  if (fieldOf(err, 'name') === 'TimeoutError') return `no answer within ${STATUS_TIMEOUT_MS / 1000}s`;
  const cause = fieldOf(err, 'cause');
  const causeText = [fieldOf(cause, 'message'), fieldOf(cause, 'code')].find(
    (v) => typeof v === 'string' && v,
  );
  return typeof causeText === 'string' ? causeText : errorMessage(err);
}

function isStatusDocument(v: unknown): v is StatusDocument {
  const errors = fieldOf(v, 'errors');
  return Array.isArray(fieldOf(v, 'pods')) && (errors === undefined || Array.isArray(errors));
}

/** GET <server>/status; never throws. */
export async function fetchStatus(server: string, timeoutMs = STATUS_TIMEOUT_MS): Promise<FetchResult> {
  let res: Response;
  let body: string;
  try {
    res = await fetch(`${server}/status`, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: { accept: 'application/json' },
    });
    body = await res.text();
  } catch (err) {
    return { ok: false, message: `cannot reach podvol at ${server}: ${unreachableReason(err)}` };
  }
  if (res.status !== 200) {
    const first = (body.trim().split('\n')[0] ?? '').slice(0, 200);
    return {
      ok: false,
      message: `podvol at ${server} answered ${res.status} ${res.statusText} for /status${first ? `: ${first}` : ''}`,
    };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (err) {
    return {
      ok: false,
      message: `podvol at ${server} sent a /status that is not JSON: ${errorMessage(err)}`,
    };
  }
  if (!isStatusDocument(doc)) {
    return { ok: false, message: `podvol at ${server} sent a /status without a "pods" list (is it podvol?)` };
  }
  const hold = doc.teardownHold;
  return {
    ok: true,
    body,
    doc: {
      node: doc.node ?? '',
      pods: doc.pods,
      errors: doc.errors ?? [],
      ...(typeof fieldOf(hold, 'message') === 'string' ? { teardownHold: hold } : {}),
    },
  };
}

// kubectl prints this for an unknown age (an older podvol's /status has no `since`).
const UNKNOWN_AGE = '<unknown>';

/** apimachinery's duration.HumanDuration, as kubectl's AGE column shows it. */
export function humanDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 0) return '0s';
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (h < 24 * 365 * 2) return `${d}d`;
  const y = Math.floor(d / 365);
  return h < 24 * 365 * 8 && d % 365 !== 0 ? `${y}y${d % 365}d` : `${y}y`;
}

const ageOf = (since: string | undefined, now: number): string => {
  const t = since ? Date.parse(since) : Number.NaN;
  return Number.isNaN(t) ? UNKNOWN_AGE : humanDuration(now - t);
};

const oneLine = (s: string | undefined) => (s ?? '').replace(/\s*\n\s*/g, ' ');

function describeSourceError(e: SourceError): string {
  const where = [
    e.source,
    e.file ?? '',
    e.document !== undefined ? `document ${e.document}` : '',
    e.namespace || e.name ? `${e.namespace ?? ''}/${e.name ?? ''}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  const further = e.furtherErrors ? ` (and ${e.furtherErrors} more errors in this file)` : '';
  return `${where}: ${e.reason}: ${oneLine(e.message)}${further}`;
}

/**
 * Pods that share a namespace and name with another UID (a static pod
 * recreated while the old one's volumes are still torn down, a pod deleted
 * and created again): their rows would read the same, so their POD cell
 * carries the UID.
 */
function namesShared(pods: readonly PodStatus[]): Set<string> {
  const uids = new Map<string, Set<string>>();
  for (const p of pods) {
    if (!p.name) continue;
    const key = `${p.namespace}/${p.name}`;
    uids.set(key, (uids.get(key) ?? new Set()).add(p.uid));
  }
  return new Set([...uids].filter(([, u]) => u.size > 1).map(([key]) => key));
}

/**
 * The kubectl-style table: one row per volume (a pod without volumes gets one
 * row), then `TEARDOWN HOLD:` while the settle guard holds a teardown, then
 * `ERRORS:` with every source error and pod-level problem.
 * `wide` adds PATH, ATTEMPTS and MESSAGE, as `kubectl get -o wide` adds columns.
 */
export function formatStatus(doc: StatusDocument, format: 'table' | 'wide', now = Date.now()): string {
  const wide = format === 'wide';
  const headers = ['namespace', 'pod', 'volume', 'plugin', 'state', 'age', 'reason'];
  if (wide) headers.push('path', 'attempts', 'message');
  const rows: string[][] = [];
  const problems: string[] = [];
  const shared = namesShared(doc.pods);
  for (const p of doc.pods) {
    // A pod known only by its leftover directory has no name; its UID is what identifies it.
    const pod = !p.name
      ? p.uid
      : shared.has(`${p.namespace}/${p.name}`)
        ? `${p.name} (uid ${p.uid})`
        : p.name;
    const volumes = p.volumes ?? [];
    if (volumes.length === 0) rows.push([p.namespace, pod, '', '', '', UNKNOWN_AGE, '']);
    for (const v of volumes) {
      // CSI volumes name their driver, and a running SetUp its step: "kubernetes.io/csi (d.example.com)", "pending/staging".
      const plugin = v.driver ? `${v.plugin} (${v.driver})` : v.plugin;
      const state = v.phase ? `${v.state}/${v.phase}` : v.state;
      const row = [p.namespace, pod, v.name, plugin, state, ageOf(v.since, now), v.reason];
      if (wide) row.push(v.path, String(v.attempts ?? 0), oneLine(v.message));
      rows.push(row);
    }
    if (p.message)
      problems.push(
        `pod ${p.namespace || p.name ? `${p.namespace}/${p.name} ` : ''}${p.uid}: ${oneLine(p.message)}`,
      );
  }
  let out = '';
  if (rows.length > 0) out += formatTable(headers, rows);
  // Nothing is torn down while it lasts, which an operator who emptied the manifest directory must see.
  if (doc.teardownHold)
    out += `${out ? '\n' : ''}TEARDOWN HOLD:\n  ${oneLine(doc.teardownHold.message)} (see --teardown-settle-period)\n`;
  const errors = [...doc.errors.map(describeSourceError), ...problems];
  if (errors.length > 0) out += `${out ? '\n' : ''}ERRORS:\n${errors.map((e) => `  ${e}\n`).join('')}`;
  return out;
}
