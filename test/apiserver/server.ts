// A small but faithful Kubernetes API server for tests: real REST paths, JSON
// shapes, Status errors, resourceVersions, list+watch with selectors, 410 Gone
// after compaction, bearer-token auth, plus hooks to break it on purpose
// (drop or freeze watches, stall, go down, forbid), TokenReview and
// SubjectAccessReview decided by RBAC objects in the store. Clients under test talk to
// it through the real @kubernetes/client-node, never a mock.
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TLSSocket } from 'node:tls';
import { stringify } from 'yaml';
import { errorMessage } from '../../src/errno.ts';
import { listenLocal } from '../helpers/listen.ts';
import { at } from '../helpers/must.ts';
import { applyPatch } from './patch.ts';
import {
  apiGroup,
  apiVersionOf,
  groupList,
  type ResourceDef,
  type ResourceOptions,
  resourceList,
  resourceTable,
} from './resources.ts';
import { type IssuedIdentity, subjectAccessReview, tokenReview, type UserInfo } from './reviews.ts';
import {
  type KubeObj,
  type Matcher,
  parseFieldSelector,
  parseLabelSelector,
  SelectorError,
} from './selectors.ts';
import { StatusError, tooOld } from './status.ts';
import { TestStore } from './store.ts';
import { testCaCert, testServerCert, testServerKey } from './tls.ts';

export type { UserInfo } from './reviews.ts';
export type { KubeObj } from './selectors.ts';
export { StatusError } from './status.ts';
export { TestStore } from './store.ts';

export interface TestApiServerOptions extends ResourceOptions {
  /** Bearer token clients must send (default: a random one; see `token` on the result). */
  token?: string;
  /** User name used in 403 messages (default system:node:test-node). */
  user?: string;
  /** Interval of BOOKMARK events on watches that allow them (default 60 s, like kube-apiserver). */
  bookmarkIntervalMs?: number;
  /** Lower bound on TokenRequest spec.expirationSeconds (default 600, the real server's). */
  minTokenExpirationSeconds?: number;
  /**
   * Upper bound on issued token lifetimes, like kube-apiserver's
   * --service-account-max-token-expiration: longer requests are capped and the
   * capped value is returned in spec.expirationSeconds.
   */
  maxTokenExpirationSeconds?: number;
  /** Further bearer tokens TokenReview knows (token → user); they cannot call the API themselves. */
  users?: Record<string, UserInfo>;
}

export interface RequestRecord {
  method: string;
  path: string;
  query: Record<string, string>;
  verb?: string;
  /** Plural resource name, e.g. `pods`. */
  resource?: string;
  group?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  code: number;
  body?: unknown;
}

export interface ForbidRule {
  verb?: string;
  /** Plural resource name, e.g. `serviceaccounts`. */
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

export interface IssuedToken {
  namespace: string;
  serviceAccount: string;
  audiences: string[];
  expirationSeconds: number;
  boundObjectRef?: { kind?: string; apiVersion?: string; name?: string; uid?: string };
  token: string;
  expirationTimestamp: string;
}

export interface TestApiHooks {
  /** Every request served so far (oldest first), with its response code. */
  readonly requests: RequestRecord[];
  clearRequests(): void;
  /** Every TokenRequest answered with a token. */
  readonly issuedTokens: IssuedToken[];
  /** Close every open watch stream abruptly (socket destroyed mid-stream). */
  dropWatches(): void;
  /**
   * Watches go silent as over a half-open TCP connection: open streams stop
   * delivering and ignore timeoutSeconds, new watch requests never get a
   * response. `unfreezeWatches()` lets new watches work again.
   */
  freezeWatches(): void;
  unfreezeWatches(): void;
  /** Delay every response by `ms` (0 turns it off). */
  stall(ms: number): void;
  /** Refuse connections: close the listener and every open connection. */
  down(): Promise<void>;
  /** Listen again on the same port. */
  up(): Promise<void>;
  /**
   * Make every resourceVersion handed out so far too old: list and watch
   * requests with one answer 410 Gone. With `expireWatches`, open watches also
   * get an ERROR event (Status 410) and are closed, like a lagging watch cache.
   */
  compact(opts?: { expireWatches?: boolean }): void;
  /** Answer matching requests with 403 Forbidden until the returned function is called. */
  forbid(rule: ForbidRule): () => void;
  /** Change the accepted bearer token (old one gets 401 from now on). */
  setToken(token: string): void;
  /** Send a BOOKMARK now on every open watch that allows bookmarks. */
  sendBookmarks(): void;
  /** Number of open watch streams. */
  openWatches(): number;
  /** TLS connections accepted so far (a client that reuses connections makes fewer than requests). */
  connections(): number;
  /** Of those, the ones whose handshake resumed an earlier TLS session (no full handshake). */
  resumedConnections(): number;
  /** Make TokenReview know `token` as `user` (removing it again with the returned function). */
  addUser(token: string, user: UserInfo): () => void;
}

export interface TestApiServer {
  /** Base URL, e.g. https://127.0.0.1:41234 (TLS with the test CA in `caCert`). */
  readonly url: string;
  /** PEM of the CA that signed the server certificate (127.0.0.1, ::1, localhost). */
  readonly caCert: string;
  /** The bearer token in use. */
  readonly token: string;
  readonly store: TestStore;
  readonly hooks: TestApiHooks;
  /** Writes `<dir>/kubeconfig` pointing at this server with the bearer token; returns its path. */
  kubeconfigPath(dir: string, opts?: { token?: string }): Promise<string>;
  close(): Promise<void>;
}

interface OpenWatch {
  res: ServerResponse;
  bookmarks: boolean;
  kind: string;
  apiVersion: string;
  frozen: boolean;
  end(): void;
}

interface Route {
  group: string;
  version: string;
  def: ResourceDef;
  namespace?: string;
  name?: string;
  subresource?: string;
}

const isoSeconds = (d: Date) => d.toISOString().replace(/\.\d+Z$/, 'Z');

/** A part of the URL the verb needs: a request without it names no resource this server has. */
function required(value: string | undefined, what: string): string {
  if (value === undefined)
    throw new StatusError(404, `the server could not find the requested resource (${what})`);
  return value;
}

function b64url(o: unknown): string {
  return Buffer.from(JSON.stringify(o)).toString('base64url');
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  if (chunks.length === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new StatusError(400, `the body of the request could not be decoded as JSON`);
  }
}

export async function startTestApiServer(opts: TestApiServerOptions = {}): Promise<TestApiServer> {
  const defs = resourceTable(opts);
  const store = new TestStore(defs);
  const user = opts.user ?? 'system:node:test-node';
  const bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 60_000;
  const minExpiration = opts.minTokenExpirationSeconds ?? 600;
  let token = opts.token ?? `test-${randomUUID()}`;
  let stallMs = 0;
  let watchesFrozen = false;
  let tokenCounter = 0;
  const requests: RequestRecord[] = [];
  const issuedTokens: IssuedToken[] = [];
  const issuedIdentities: IssuedIdentity[] = [];
  const staticUsers = new Map<string, UserInfo>(Object.entries(opts.users ?? {}));
  // TokenReview knows the server's own token too, as the user it serves.
  const reviewUsers = () =>
    new Map([
      ...staticUsers,
      [token, { username: user, groups: user.startsWith('system:node:') ? ['system:nodes'] : [] }],
    ]);
  const forbidRules = new Set<ForbidRule>();
  const watches = new Set<OpenWatch>();
  const hanging = new Set<ServerResponse>();

  function route(segments: string[]): { group: string; version: string; rest: string[] } | undefined {
    const [root, first, second] = segments;
    if (root === 'api' && first !== undefined) return { group: '', version: first, rest: segments.slice(2) };
    if (root === 'apis' && first !== undefined && second !== undefined) {
      return { group: first, version: second, rest: segments.slice(3) };
    }
    return undefined;
  }

  function resolve(group: string, version: string, rest: string[]): Route | undefined {
    let namespace: string | undefined;
    let parts = rest;
    if (parts[0] === 'namespaces' && parts.length >= 3) {
      namespace = parts[1];
      parts = parts.slice(2);
    }
    const def = defs.find((d) => d.group === group && d.versions.includes(version) && d.plural === parts[0]);
    if (!def || parts.length > 3) return undefined;
    if (namespace !== undefined && !def.namespaced) return undefined;
    const [, name, subresource] = parts;
    if (subresource !== undefined && !def.subresources.includes(subresource)) return undefined;
    return { group, version, def, namespace, name, subresource };
  }

  function forbidden(verb: string, r: Route): StatusError | undefined {
    for (const rule of forbidRules) {
      if (rule.verb !== undefined && rule.verb !== verb) continue;
      if (rule.resource !== undefined && rule.resource !== r.def.plural) continue;
      if (rule.subresource !== undefined && rule.subresource !== r.subresource) continue;
      if (rule.namespace !== undefined && rule.namespace !== r.namespace) continue;
      if (rule.name !== undefined && rule.name !== r.name) continue;
      const qualified = r.group === '' ? r.def.plural : `${r.def.plural}.${r.group}`;
      const res = r.subresource ? `${r.def.plural}/${r.subresource}` : r.def.plural;
      const scope = r.namespace !== undefined ? `in the namespace "${r.namespace}"` : 'at the cluster scope';
      const who = r.name !== undefined ? `${qualified} "${r.name}"` : qualified;
      return new StatusError(
        403,
        `${who} is forbidden: User "${user}" cannot ${verb} resource "${res}" in API group "${r.group}" ${scope}`,
        { details: { name: r.name, group: r.group, kind: r.def.plural } },
      );
    }
    return undefined;
  }

  function selectors(def: ResourceDef, q: URLSearchParams): Matcher {
    try {
      const field = q.get('fieldSelector');
      const label = q.get('labelSelector');
      const fm = field ? parseFieldSelector(field, def.fieldLabels) : () => true;
      const lm = label ? parseLabelSelector(label) : () => true;
      return (o) => fm(o) && lm(o);
    } catch (e) {
      if (e instanceof SelectorError) throw new StatusError(400, e.message);
      throw e;
    }
  }

  function parseRV(raw: string | null): number | undefined {
    if (raw === null || raw === '' || raw === '0') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) {
      throw new StatusError(400, `resourceVersion: Invalid value: "${raw}": must be a non-negative integer`);
    }
    return n;
  }

  /** Objects as served: apiVersion of the requested version (stored once for all versions). */
  function out(o: KubeObj, r: Route): KubeObj {
    return { ...o, apiVersion: apiVersionOf(r.def, r.version), kind: r.def.kind };
  }

  function checkNamespace(body: KubeObj, r: Route): void {
    const ns = body.metadata?.namespace;
    if (r.def.namespaced && ns && ns !== r.namespace) {
      throw new StatusError(
        400,
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
  }

  function asObject(body: unknown): KubeObj {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new StatusError(400, 'the body of the request must be a JSON object');
    }
    const o = body as KubeObj;
    o.metadata ??= {};
    return o;
  }

  function startWatch(req: IncomingMessage, res: ServerResponse, r: Route, q: URLSearchParams): void {
    const matches = selectors(r.def, q);
    const fromRV = parseRV(q.get('resourceVersion'));
    const kind = r.def.kind;
    const apiVersion = apiVersionOf(r.def, r.version);
    if (watchesFrozen) {
      // A black hole: the request is accepted and never answered.
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    const timers: NodeJS.Timeout[] = [];
    let unsubscribe = () => {};
    const w: OpenWatch = {
      res,
      bookmarks: q.get('allowWatchBookmarks') === 'true' || q.get('allowWatchBookmarks') === '1',
      kind,
      apiVersion,
      frozen: false,
      end() {
        unsubscribe();
        for (const t of timers) clearTimeout(t);
        watches.delete(w);
        if (!res.writableEnded && !w.frozen) res.end();
      },
    };
    const send = (type: string, object: unknown) => {
      if (w.frozen || res.writableEnded || res.destroyed) return;
      res.write(`${JSON.stringify({ type, object })}\n`);
    };
    watches.add(w);
    res.on('close', () => w.end());
    try {
      unsubscribe = store.watch(r.def.id, fromRV, { namespace: r.namespace, matches }, (type, o) =>
        send(type, out(o, r)),
      );
    } catch (e) {
      if (e instanceof StatusError) {
        send('ERROR', e.toStatus());
        w.end();
        return;
      }
      throw e;
    }
    const timeoutSeconds = Number(q.get('timeoutSeconds') ?? 1800);
    timers.push(
      setTimeout(() => {
        if (!w.frozen) w.end();
      }, timeoutSeconds * 1000),
    );
    if (w.bookmarks) {
      const tick = () => {
        sendBookmark(w);
        timers.push(setTimeout(tick, bookmarkIntervalMs));
      };
      timers.push(setTimeout(tick, bookmarkIntervalMs));
    }
    void req;
  }

  function sendBookmark(w: OpenWatch): void {
    if (!w.bookmarks || w.frozen || w.res.writableEnded) return;
    const object = {
      kind: w.kind,
      apiVersion: w.apiVersion,
      metadata: { resourceVersion: String(store.resourceVersion()) },
    };
    w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object })}\n`);
  }

  function issueToken(r: Route, body: unknown): Record<string, unknown> {
    const ns = required(r.namespace, 'a namespace');
    const saName = required(r.name, 'a ServiceAccount name');
    const sa = store.mustGet('serviceaccounts', ns, saName);
    const tr = asObject(body);
    const spec = { ...((tr.spec as Record<string, unknown> | undefined) ?? {}) };
    const requested = Number(spec.expirationSeconds ?? 3600);
    const expirationSeconds = Math.min(requested, opts.maxTokenExpirationSeconds ?? requested);
    if (requested < minExpiration) {
      throw new StatusError(
        422,
        `TokenRequest.authentication.k8s.io "${saName}" is invalid: spec.expirationSeconds: Invalid value: ${requested}: may not specify a duration less than 10 minutes`,
        { details: { name: saName, group: 'authentication.k8s.io', kind: 'TokenRequest' } },
      );
    }
    const audiences = (spec.audiences as string[] | undefined)?.length
      ? (spec.audiences as string[])
      : ['https://kubernetes.default.svc.cluster.local'];
    const ref = spec.boundObjectRef as IssuedToken['boundObjectRef'];
    let podClaim: { name: string; uid: string } | undefined;
    if (ref && (ref.kind ?? '') === 'Pod') {
      const pod = store.mustGet('pods', ns, ref.name ?? '');
      const podSA =
        (pod.spec as { serviceAccountName?: string } | undefined)?.serviceAccountName || 'default';
      if (podSA !== saName) {
        throw new StatusError(
          400,
          `cannot bind token for serviceaccount "${saName}" to pod running with different serviceaccount name.`,
        );
      }
      if (ref.uid && ref.uid !== pod.metadata.uid) {
        throw new StatusError(
          409,
          `Operation cannot be fulfilled on Pod "${ref.name}": the UID in the bound object reference (${ref.uid}) does not match the UID in record. The object might have been deleted and then recreated`,
          { details: { name: ref.name, kind: 'Pod' } },
        );
      }
      podClaim = { name: pod.metadata.name ?? '', uid: pod.metadata.uid ?? '' };
    }
    const n = ++tokenCounter;
    const now = Math.floor(Date.now() / 1000);
    const exp = now + expirationSeconds;
    const jwt = [
      b64url({ alg: 'RS256', kid: 'test-api-server' }),
      b64url({
        aud: audiences,
        exp,
        iat: now,
        nbf: now,
        iss: 'https://kubernetes.default.svc.cluster.local',
        jti: String(n),
        sub: `system:serviceaccount:${ns}:${saName}`,
        'kubernetes.io': {
          namespace: ns,
          serviceaccount: { name: saName, uid: sa.metadata.uid },
          ...(podClaim ? { pod: podClaim } : {}),
        },
      }),
      `fake-signature-${n}`,
    ].join('.');
    const expirationTimestamp = isoSeconds(new Date(exp * 1000));
    issuedIdentities.push({
      token: jwt,
      namespace: ns,
      serviceAccount: saName,
      serviceAccountUID: sa.metadata.uid,
      audiences,
      exp,
      pod: podClaim,
    });
    issuedTokens.push({
      namespace: ns,
      serviceAccount: saName,
      audiences,
      expirationSeconds,
      boundObjectRef: ref,
      token: jwt,
      expirationTimestamp,
    });
    return {
      kind: 'TokenRequest',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { name: saName, namespace: ns, creationTimestamp: isoSeconds(new Date(now * 1000)) },
      spec: { ...spec, audiences, expirationSeconds },
      status: { token: jwt, expirationTimestamp },
    };
  }

  function listObjects(r: Route, q: URLSearchParams): Record<string, unknown> {
    const rv = parseRV(q.get('resourceVersion'));
    if (rv !== undefined) {
      try {
        store.checkNotCompacted(rv);
      } catch {
        throw new StatusError(410, 'The resourceVersion for the provided list is too old.');
      }
    }
    const matches = selectors(r.def, q);
    const items = store
      .list(r.def.id, r.namespace)
      .filter(matches)
      .map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
    return {
      kind: `${r.def.kind}List`,
      apiVersion: apiVersionOf(r.def, r.version),
      metadata: { resourceVersion: String(store.resourceVersion()) },
      items,
    };
  }

  /** Serve one resource request; returns [code, body] or undefined when it took over the response (watch). */
  async function serveResource(
    req: IncomingMessage,
    res: ServerResponse,
    r: Route,
    q: URLSearchParams,
    rec: RequestRecord,
  ): Promise<[number, unknown] | undefined> {
    const method = req.method ?? 'GET';
    const isWatch = q.get('watch') === 'true' || q.get('watch') === '1';
    let verb: string;
    if (method === 'GET') verb = r.name === undefined ? (isWatch ? 'watch' : 'list') : 'get';
    else if (method === 'POST') verb = 'create';
    else if (method === 'PUT') verb = 'update';
    else if (method === 'PATCH') verb = 'patch';
    else if (method === 'DELETE') verb = r.name === undefined ? 'deletecollection' : 'delete';
    else throw new StatusError(405, `the server does not allow this method on the requested resource`);
    rec.verb = verb;
    const denied = forbidden(verb, r);
    if (denied) throw denied;
    const body = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method) ? await readBody(req) : undefined;
    rec.body = body;
    const id = r.def.id;

    if (r.def.createOnly) {
      if (verb !== 'create')
        throw new StatusError(405, 'the server does not allow this method on the requested resource');
      if (r.def.plural === 'tokenreviews') return [201, tokenReview(body, reviewUsers(), issuedIdentities)];
      return [201, subjectAccessReview(body, store)];
    }
    if (r.subresource === 'token') {
      if (verb !== 'create')
        throw new StatusError(405, 'the server does not allow this method on the requested resource');
      return [201, issueToken(r, body)];
    }
    switch (verb) {
      case 'watch':
        startWatch(req, res, r, q);
        return undefined;
      case 'list':
        return [200, listObjects(r, q)];
      case 'get':
        return [200, out(store.mustGet(id, r.namespace, required(r.name, 'a name')), r)];
      case 'create': {
        if (r.name !== undefined)
          throw new StatusError(405, 'the server does not allow this method on the requested resource');
        const o = asObject(body);
        checkNamespace(o, r);
        if (r.def.namespaced) o.metadata.namespace = r.namespace;
        return [201, out(store.create(id, o), r)];
      }
      case 'update': {
        const o = asObject(body);
        checkNamespace(o, r);
        if (o.metadata.name && o.metadata.name !== r.name) {
          throw new StatusError(
            400,
            `the name of the object (${o.metadata.name}) does not match the name on the URL (${r.name})`,
          );
        }
        o.metadata.name = r.name;
        if (r.def.namespaced) o.metadata.namespace = r.namespace;
        return [200, out(store.update(id, o, { subresource: r.subresource }), r)];
      }
      case 'patch': {
        const cur = store.mustGet(id, r.namespace, required(r.name, 'a name'));
        const patched = asObject(applyPatch(String(req.headers['content-type'] ?? ''), cur, body));
        patched.metadata.name = r.name;
        if (r.def.namespaced) patched.metadata.namespace = r.namespace;
        return [200, out(store.update(id, patched, { subresource: r.subresource }), r)];
      }
      case 'delete': {
        const opts = (body ?? {}) as { gracePeriodSeconds?: number };
        const qGrace = q.get('gracePeriodSeconds');
        const gracePeriodSeconds = qGrace !== null ? Number(qGrace) : opts.gracePeriodSeconds;
        return [
          200,
          out(store.delete(id, r.namespace, required(r.name, 'a name'), { gracePeriodSeconds }), r),
        ];
      }
      case 'deletecollection': {
        const matches = selectors(r.def, q);
        for (const o of store.list(id, r.namespace).filter(matches)) {
          store.delete(id, o.metadata.namespace, o.metadata.name ?? '');
        }
        return [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' }];
      }
    }
    throw new StatusError(405, 'the server does not allow this method on the requested resource');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const q = url.searchParams;
    const rec: RequestRecord = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(q),
      code: 0,
    };
    requests.push(rec);
    const send = (code: number, body: unknown) => {
      rec.code = code;
      if (res.destroyed) return;
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      if (stallMs > 0) await sleep(stallMs);
      const auth = req.headers.authorization ?? '';
      if (auth !== `Bearer ${token}`) throw new StatusError(401, 'Unauthorized');
      const segments = url.pathname.split('/').filter((s) => s !== '');
      if (url.pathname === '/version') {
        return send(200, {
          major: '1',
          minor: '34',
          gitVersion: 'v1.34.0-podvol-test',
          platform: 'linux/amd64',
        });
      }
      if (url.pathname === '/api') {
        return send(200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
      }
      if (url.pathname === '/apis') return send(200, groupList(defs));
      if (segments[0] === 'apis' && segments.length === 2) {
        const g = apiGroup(defs, at(segments, 1));
        if (!g) throw new StatusError(404, 'the server could not find the requested resource');
        return send(200, g);
      }
      const base = route(segments);
      if (base && base.rest.length === 0) {
        const served = defs.some((d) => d.group === base.group && d.versions.includes(base.version));
        if (!served) throw new StatusError(404, 'the server could not find the requested resource');
        return send(200, resourceList(defs, base.group, base.version));
      }
      const r = base && resolve(base.group, base.version, base.rest);
      if (!r) throw new StatusError(404, 'the server could not find the requested resource');
      Object.assign(rec, {
        resource: r.def.plural,
        group: r.group,
        subresource: r.subresource,
        namespace: r.namespace,
        name: r.name,
      });
      const result = await serveResource(req, res, r, q, rec);
      if (result) send(result[0], result[1]);
      else rec.code = res.headersSent ? 200 : 0;
    } catch (e) {
      if (e instanceof StatusError) return send(e.code, e.toStatus());
      send(500, new StatusError(500, `test API server: ${errorMessage(e)}`).toStatus());
    }
  }

  const tls = { cert: testServerCert, key: testServerKey };
  let server: Server = createServer(tls);
  const onRequest = (req: IncomingMessage, res: ServerResponse) => void handle(req, res);
  let accepted = 0;
  let resumed = 0;
  const onConnection = (socket: TLSSocket) => {
    accepted++;
    if (socket.isSessionReused()) resumed++;
  };
  server.on('request', onRequest);
  server.on('secureConnection', onConnection);
  const port = await listenLocal(server);
  const url = `https://127.0.0.1:${port}`;
  let isDown = false;

  function closeEverything(): Promise<void> {
    for (const w of [...watches]) {
      w.frozen = true;
      w.end();
    }
    for (const h of hanging) h.destroy();
    hanging.clear();
    const closed = new Promise<void>((ok) => server.close(() => ok()));
    server.closeAllConnections();
    return closed;
  }

  const hooks: TestApiHooks = {
    requests,
    clearRequests: () => {
      requests.length = 0;
    },
    issuedTokens,
    dropWatches() {
      for (const w of [...watches]) {
        w.frozen = true;
        w.end();
        w.res.destroy();
      }
    },
    freezeWatches() {
      watchesFrozen = true;
      for (const w of watches) w.frozen = true;
    },
    unfreezeWatches() {
      watchesFrozen = false;
    },
    stall(ms: number) {
      stallMs = ms;
    },
    async down() {
      if (isDown) return;
      isDown = true;
      await closeEverything();
    },
    async up() {
      if (!isDown) return;
      server = createServer(tls);
      server.on('request', onRequest);
      server.on('secureConnection', onConnection);
      await new Promise<void>((ok, fail) => {
        server.once('error', fail);
        server.listen(port, '127.0.0.1', () => ok());
      });
      isDown = false;
    },
    compact(o = {}) {
      store.compact();
      if (!o.expireWatches) return;
      for (const w of [...watches]) {
        if (w.frozen) continue;
        w.res.write(
          `${JSON.stringify({ type: 'ERROR', object: tooOld(store.resourceVersion() - 1, store.resourceVersion()).toStatus() })}\n`,
        );
        w.end();
      }
    },
    forbid(rule: ForbidRule) {
      forbidRules.add(rule);
      return () => forbidRules.delete(rule);
    },
    setToken(t: string) {
      token = t;
    },
    sendBookmarks() {
      for (const w of watches) sendBookmark(w);
    },
    openWatches: () => [...watches].filter((w) => !w.frozen).length,
    connections: () => accepted,
    resumedConnections: () => resumed,
    addUser(t: string, u: UserInfo) {
      staticUsers.set(t, u);
      return () => staticUsers.delete(t);
    },
  };

  return {
    url,
    get token() {
      return token;
    },
    caCert: testCaCert,
    store,
    hooks,
    async kubeconfigPath(dir: string, o: { token?: string } = {}) {
      const path = join(dir, 'kubeconfig');
      const config = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'test',
            cluster: {
              server: url,
              'certificate-authority-data': Buffer.from(testCaCert).toString('base64'),
            },
          },
        ],
        users: [{ name: 'test', user: { token: o.token ?? token } }],
        contexts: [{ name: 'test', context: { cluster: 'test', user: 'test' } }],
        'current-context': 'test',
      };
      await writeFile(path, stringify(config), { mode: 0o600 });
      return path;
    },
    async close() {
      if (!isDown) await closeEverything();
      isDown = true;
    },
  };
}
