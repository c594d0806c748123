// The runtime socket: HTTP/1.1 with JSON over a unix socket, for the runtime
// that runs this node's containers. The socket is 0600 in a 0700 directory,
// both root's (0660/0710 and the group with --runtime-socket-group), and every
// connection's peer credentials are checked before a byte is read: a caller
// that is neither root nor in the configured group gets 403 and is dropped.
import { chmod, chown, lstat, mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { errnoCode, errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { createConnectionBudget, LISTEN_BACKLOG, perPeerNotices } from '../connection-budget.ts';
import {
  type Answer,
  containerMounts,
  listPods,
  parseWaitQuery,
  podTerminated,
  type RuntimeApiOptions,
  waitVolumes,
} from './api.ts';
import { RuntimeApiError } from './errors.ts';
import { callerAllowed, type PeerCredentials } from './peercred.ts';
import {
  clearSocketPath,
  privateNameBeside,
  publishSocket,
  removeIfOurs,
  type SocketIdentity,
} from './socket-path.ts';

export interface RuntimeServerOptions extends RuntimeApiOptions {
  path: string;
  /** GID allowed besides root. */
  group?: number;
  logger: Logger;
  peerCred: (socket: Socket) => PeerCredentials;
  /** Connection caps (the daemon scales them to its descriptor limit); runtimeLimits where not given. */
  limits?: Partial<typeof runtimeLimits>;
}

/**
 * Bounds of the runtime socket: at most `max` connections, `perPeer` for one
 * UID (so a member of the group cannot crowd out root's runtime), the least
 * recently used idle connection evicted for a new one (connection-budget.ts),
 * except that a caller at its share is refused one that has not spoken yet.
 * Idle and keep-alive connections go after 30 s; a request must arrive whole
 * within 10 s of its first byte (headers) and 30 s in all. A `?wait=` answer
 * can take 300 s: that is the response, which no timeout here limits.
 */
/** Refused connections that may wait at once for their 403 to be read. */
const MAX_LINGERING_REFUSED = 16;

export const runtimeLimits = {
  max: 256,
  perPeer: 128,
  idleMs: 30_000,
  keepAliveTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  connectionsCheckingIntervalMs: 1_000,
};

export interface RuntimeServer {
  server: Server;
  close(): Promise<void>;
}

const POD = '([^/]+)';
const routes: {
  method: string;
  re: RegExp;
  /** `pod` and `container` are the route's captured path segments (empty where it has none). */
  run: (
    o: RuntimeApiOptions,
    m: { pod: string; container: string },
    url: URL,
    signal: AbortSignal,
  ) => Promise<Answer> | Answer;
}[] = [
  { method: 'GET', re: /^\/v1\/pods$/, run: (o, _m, url, signal) => listPods(o, url.searchParams, signal) },
  {
    method: 'GET',
    re: new RegExp(`^/v1/pods/${POD}/volumes$`),
    run: (o, m, url, signal) => {
      const q = parseWaitQuery(url.searchParams);
      return waitVolumes(o, m.pod, q.waitSeconds, q.for, signal);
    },
  },
  {
    method: 'GET',
    re: new RegExp(`^/v1/pods/${POD}/containers/${POD}/mounts$`),
    run: (o, m) => containerMounts(o, m.pod, m.container),
  },
  { method: 'POST', re: new RegExp(`^/v1/pods/${POD}/terminated$`), run: (o, m) => podTerminated(o, m.pod) },
];

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

async function handle(o: RuntimeServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://podvol');
  } catch {
    return send(res, 400, { reason: 'BadRequest', message: 'malformed request target' });
  }
  let segments: string[];
  try {
    segments = url.pathname.split('/').map(decodeURIComponent);
  } catch {
    return send(res, 400, { reason: 'BadRequest', message: 'malformed percent-encoding in path' });
  }
  // Match on decoded segments that cannot contain '/' themselves.
  if (segments.some((s, i) => i > 0 && (s === '' || s.includes('/')))) {
    return send(res, 404, { reason: 'NotFound', message: `no such endpoint: ${url.pathname}` });
  }
  const path = segments.join('/');
  const matching = routes.filter((r) => r.re.test(path));
  if (matching.length === 0)
    return send(res, 404, { reason: 'NotFound', message: `no such endpoint: ${path}` });
  const route = matching.find((r) => r.method === req.method);
  if (!route) {
    res.setHeader('allow', matching.map((r) => r.method).join(', '));
    return send(res, 405, { reason: 'MethodNotAllowed', message: `${req.method} is not allowed on ${path}` });
  }
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  try {
    const [, pod = '', container = ''] = route.re.exec(path) ?? [];
    const answer = await route.run(o, { pod, container }, url, gone.signal);
    if (!res.destroyed) send(res, answer.status, answer.body);
  } catch (err) {
    if (err instanceof RuntimeApiError) {
      return send(res, err.status, { reason: err.reason, message: err.message, ...err.extra });
    }
    o.logger.error({ err: errorMessage(err), path }, 'runtime API request failed');
    send(res, 500, { reason: 'InternalError', message: errorMessage(err) });
  }
}

/** Creates the directory (0700, or 0710 for a group) or checks an existing one is root's and not writable by others. */
async function prepareDirectory(dir: string, group: number | undefined): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
    await chmod(dir, group === undefined ? 0o700 : 0o710);
    if (group !== undefined) await chown(dir, 0, group);
    return;
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') {
      if (errnoCode(err) === 'ENOENT') {
        await mkdir(dirname(dir), { recursive: true, mode: 0o755 });
        return prepareDirectory(dir, group);
      }
      throw err;
    }
  }
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new Error(`runtime socket directory ${dir} is not a directory`);
  if (st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(
      `runtime socket directory ${dir} must be root's and not writable by group or others (it is uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8)})`,
    );
  }
}

export async function startRuntimeServer(options: RuntimeServerOptions): Promise<RuntimeServer> {
  const o = { mountsCache: new WeakMap<object, Map<string, unknown>>(), ...options };
  const log = o.logger.child({ component: 'runtime-socket' });
  await prepareDirectory(dirname(o.path), o.group);
  await clearSocketPath(o.path);
  const limits = { ...runtimeLimits, ...o.limits };
  const http = createServer(
    {
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
    },
    (req, res) => {
      void handle(o, req, res);
    },
  );
  // A caller at its share (half the socket) whose next connection has not
  // spoken yet is refused rather than evicting its own: a flood pays an accept
  // and a close per connection, and root's share is never touched by it.
  const budget = createConnectionBudget(limits, log, { refuseSilent: (at) => at === 'share' });
  http.prependListener('request', (req: IncomingMessage, res: ServerResponse) =>
    res.once('close', budget.busy(req.socket)),
  );
  const refusedCaller = perPeerNotices(log, 'runtime socket caller refused');
  const unreadable = perPeerNotices(log, 'cannot read peer credentials; connection refused');
  // Peer credentials are checked once per connection, before the HTTP parser
  // sees a byte: a refused caller gets a fixed 403 and is disconnected.
  const sockets = new Set<Socket>();
  let lingering = 0;
  const listener = createNetServer((socket: Socket) => {
    // The HTTP server does not track connections it did not accept itself: close() must end them.
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    let cred: PeerCredentials | undefined;
    try {
      cred = o.peerCred(socket);
    } catch (err) {
      unreadable('unknown', { err: errorMessage(err) });
    }
    if (cred && callerAllowed(cred, o.group)) {
      if (budget.admit(socket, `uid ${cred.uid}`)) http.emit('connection', socket);
      return;
    }
    if (cred) refusedCaller(`uid ${cred.uid}`, { pid: cred.pid, uid: cred.uid, gid: cred.gid });
    const body = `${JSON.stringify({
      reason: 'Forbidden',
      message: `caller uid ${cred?.uid ?? 'unknown'} is not allowed: only root${o.group !== undefined ? ` or group ${o.group}` : ''} may use the runtime socket`,
    })}\n`;
    socket.on('error', () => {});
    // Destroyed a second after the answer at most: end() alone half-closed,
    // and the connection stayed open for as long as the refused client kept
    // it. Its request is read and dropped meanwhile, so the client can write
    // it and read the 403 (destroying at once made that an EPIPE). Only a few
    // linger at a time; beyond that a refused connection is destroyed at once.
    if (lingering >= MAX_LINGERING_REFUSED) return socket.destroy();
    lingering++;
    const timer = setTimeout(() => socket.destroy(), 1_000);
    socket.once('close', () => {
      lingering--;
      clearTimeout(timer);
    });
    socket.resume();
    socket.end(
      `HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  // Bound under a private name, its modes set, then linked to the path (socket-path.ts says why).
  const bound = privateNameBeside(o.path);
  await new Promise<void>((res, rej) => {
    listener.once('error', rej);
    listener.listen({ path: bound, backlog: LISTEN_BACKLOG }, () => {
      listener.off('error', rej);
      res();
    });
  });
  // Node starts checking the header and request timeouts when its server
  // emits 'listening', which this one, fed by the net listener, never does.
  http.emit('listening');
  let ours: SocketIdentity;
  try {
    await chmod(bound, o.group === undefined ? 0o600 : 0o660);
    if (o.group !== undefined) await chown(bound, 0, o.group);
    ours = await publishSocket(bound, o.path);
  } catch (err) {
    await new Promise((res) => listener.close(res));
    throw err;
  }
  log.info({ path: o.path, group: o.group }, 'runtime socket listening');
  return {
    server: http,
    async close() {
      const closed = new Promise<void>((res) => listener.close(() => res()));
      // Also stops Node's timeout checks and the budget's idle sweep.
      http.close();
      budget.close();
      for (const s of sockets) s.destroy();
      await closed;
      if (removeIfOurs(o.path, ours) === 'replaced')
        log.warn({ path: o.path }, 'runtime socket path holds another socket now; left in place');
    },
  };
}
