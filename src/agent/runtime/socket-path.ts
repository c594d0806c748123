// Who owns --runtime-socket's path. The root-directory lock does not cover it
// (two podvols on two roots may be given the same socket), so the path is
// taken only when nobody serves it and given back only while it is still ours:
//
// - before binding, a connect probes what is there: a live socket is another
//   podvol's and is left alone; a socket that refuses the connection is stale
//   (its podvol was killed) and is removed; anything else is never removed;
// - podvol binds a private name beside the path and hard-links it to the path:
//   link(2) fails when the path exists, so a podvol that started meanwhile is
//   never replaced. (A plain bind would not do: libuv unlinks the bound path
//   when the listener closes, whoever's socket is there by then.)
// - at exit the path is unlinked only if it is still the inode linked at start.
import { randomBytes } from 'node:crypto';
import { lstatSync, unlinkSync } from 'node:fs';
import { link, lstat, unlink } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { dirname, join } from 'node:path';
import { errnoCode } from '../../errno.ts';

/** Another process serves the path: this podvol must not start on it. */
export class RuntimeSocketInUseError extends Error {
  readonly code = 'RuntimeSocketInUse';
  constructor(path: string) {
    super(
      `runtime socket ${path} is served by another podvol; stop it first (or give this one another --runtime-socket)`,
    );
  }
}

/** The socket file a podvol linked at the path: what it may remove at exit. */
export interface SocketIdentity {
  dev: bigint;
  ino: bigint;
}

/** How long a connect to a socket at the path may take before it counts as served (a full backlog, a busy server). */
export const PROBE_TIMEOUT_MS = 2_000;

type Probe = 'served' | 'refused' | 'gone';

function probe(path: string): Promise<Probe> {
  return new Promise((resolve) => {
    const sock = createConnection(path);
    const done = (p: Probe) => {
      sock.destroy();
      resolve(p);
    };
    sock.setTimeout(PROBE_TIMEOUT_MS, () => done('served'));
    sock.once('connect', () => done('served'));
    sock.once('error', (err) => {
      const code = errnoCode(err);
      // EAGAIN: the listener's backlog is full, so somebody listens.
      done(code === 'ECONNREFUSED' ? 'refused' : code === 'ENOENT' ? 'gone' : 'served');
    });
  });
}

/**
 * Leaves the path free for bind: nothing there, or a stale socket removed.
 * Throws RuntimeSocketInUseError for a socket somebody serves, and an Error
 * for anything at the path that is not a socket.
 */
export async function clearSocketPath(path: string): Promise<void> {
  let st: Awaited<ReturnType<typeof lstat>>;
  try {
    st = await lstat(path, { bigint: true });
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket()) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
  const seen = await probe(path);
  if (seen === 'served') throw new RuntimeSocketInUseError(path);
  if (seen === 'gone') return;
  // Synchronous, with nothing between: the file removed is the stale one probed, not a
  // socket another podvol linked in while the probe ran.
  try {
    const now = lstatSync(path, { bigint: true });
    if (now.dev !== st.dev || now.ino !== st.ino) throw new RuntimeSocketInUseError(path);
    unlinkSync(path);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
}

/** sun_path holds 107 bytes and a NUL. */
const MAX_SOCKET_PATH = 107;

/** A name beside `path` (same directory, so link(2) works) that nobody else uses, to bind before the path is taken. */
export function privateNameBeside(path: string): string {
  const name = join(dirname(path), `.pv-${randomBytes(4).toString('hex')}`);
  if (Buffer.byteLength(name) > MAX_SOCKET_PATH)
    throw new Error(
      `runtime socket ${path}: its directory's path is too long for podvol's private socket name beside it (at most ${MAX_SOCKET_PATH - 13} bytes)`,
    );
  return name;
}

/**
 * Publishes the socket bound at `bound` under `path` (which clearSocketPath
 * left free) and drops the private name; returns what was published.
 */
export async function publishSocket(bound: string, path: string): Promise<SocketIdentity> {
  try {
    await link(bound, path);
  } catch (err) {
    // Taken since it was cleared: another podvol started at the same moment.
    if (errnoCode(err) === 'EEXIST') throw new RuntimeSocketInUseError(path);
    throw err;
  } finally {
    await unlink(bound).catch(() => {});
  }
  const st = await lstat(path, { bigint: true });
  return { dev: st.dev, ino: st.ino };
}

/** Removes `path` if it is still the socket published; says what it found. */
export function removeIfOurs(path: string, ours: SocketIdentity): 'removed' | 'replaced' | 'gone' {
  try {
    const st = lstatSync(path, { bigint: true });
    if (st.dev !== ours.dev || st.ino !== ours.ino) return 'replaced';
    unlinkSync(path);
    return 'removed';
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return 'gone';
    throw err;
  }
}
