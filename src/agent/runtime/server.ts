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
}

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
  const http = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    void handle(o, req, res);
  });
  // Peer credentials are checked once per connection, before the HTTP parser
  // sees a byte: a refused caller gets a fixed 403 and is disconnected.
  const sockets = new Set<Socket>();
  const listener = createNetServer((socket: Socket) => {
    // The HTTP server does not track connections it did not accept itself: close() must end them.
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    let cred: PeerCredentials | undefined;
    try {
      cred = o.peerCred(socket);
    } catch (err) {
      log.warn({ err: errorMessage(err) }, 'cannot read peer credentials; connection refused');
    }
    if (cred && callerAllowed(cred, o.group)) {
      http.emit('connection', socket);
      return;
    }
    if (cred) log.warn({ pid: cred.pid, uid: cred.uid, gid: cred.gid }, 'runtime socket caller refused');
    const body = `${JSON.stringify({
      reason: 'Forbidden',
      message: `caller uid ${cred?.uid ?? 'unknown'} is not allowed: only root${o.group !== undefined ? ` or group ${o.group}` : ''} may use the runtime socket`,
    })}\n`;
    socket.on('error', () => {});
    socket.end(
      `HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  // Bound under a private name, its modes set, then linked to the path (socket-path.ts says why).
  const bound = privateNameBeside(o.path);
  await new Promise<void>((res, rej) => {
    listener.once('error', rej);
    listener.listen(bound, () => {
      listener.off('error', rej);
      res();
    });
  });
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
      for (const s of sockets) s.destroy();
      await closed;
      if (removeIfOurs(o.path, ours) === 'replaced')
        log.warn({ path: o.path }, 'runtime socket path holds another socket now; left in place');
    },
  };
}
