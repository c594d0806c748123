// Runs `podvol run` as a child process (inside the test's mount namespace) and
// gives tests its HTTP endpoints, its log lines and ways to stop or kill it.
import { type ChildProcess, spawn } from 'node:child_process';
import { lstat, mkdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { httpsRequest } from './https.ts';

export const repoRoot = join(import.meta.dirname, '..', '..');

/** Where startPodvol's daemon serves the runtime API: beside the root dir, in the test's temp dir. */
export const runtimeSocketOf = (rootDir: string) => join(rootDir, '..', 'run', 'podvol.sock');

/** A daemon's directories in a test's temp dir `base`: its root (podvol creates it) and an empty manifest directory. */
export async function daemonDirs(base: string): Promise<{ root: string; manifests: string }> {
  const manifests = join(base, 'manifests');
  await mkdir(manifests);
  return { root: join(base, 'root'), manifests };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      lastErr = err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}${lastErr ? `: ${(lastErr as Error).message}` : ''}`);
}

export interface PodvolProcess {
  url: string;
  proc: ChildProcess;
  output(): string;
  logLines(): Record<string, unknown>[];
  /** GET with an optional bearer token (sent only to a secured, non-loopback listener). */
  get(path: string, token?: string): Promise<{ status: number; body: string }>;
  status(): Promise<StatusDoc>;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StatusVolume {
  name: string;
  plugin: string;
  state: string;
  path: string;
  reason: string;
  message: string;
  attempts: number;
}
export interface StatusDoc {
  pods: { namespace: string; name: string; uid: string; volumes: StatusVolume[] }[];
  errors: { reason: string; message: string; file?: string }[];
}

export async function startPodvol(args: {
  rootDir: string;
  manifests?: string;
  extra?: string[];
  env?: Record<string, string>;
  /**
   * Listen on 0.0.0.0: podvol then serves HTTPS with authentication, and the helper
   * trusts the self-signed certificate it generates under <rootDir>/pki.
   */
  secure?: boolean;
}): Promise<PodvolProcess> {
  const port = await freePort();
  const argv = [
    join(repoRoot, 'bin', 'podvol.js'),
    'run',
    '--root-dir',
    args.rootDir,
    '--listen',
    `${args.secure ? '0.0.0.0' : '127.0.0.1'}:${port}`,
    '--node-name',
    'testnode',
    ...(args.manifests ? ['--pod-manifest-path', args.manifests] : []),
    // Never the global /run/podvol: each test's daemon has its own socket.
    '--runtime-socket',
    runtimeSocketOf(args.rootDir),
    ...(args.extra ?? []),
  ];
  const proc = spawn(process.execPath, argv, {
    env: { ...process.env, ...args.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += d;
  });
  proc.stderr?.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const url = `${args.secure ? 'https' : 'http'}://127.0.0.1:${port}`;
  const getTls = async (path: string, token?: string) =>
    httpsRequest(url + path, { ca: await readFile(join(args.rootDir, 'pki', 'podvol.crt'), 'utf8'), token });
  const get = async (path: string, token?: string) => {
    if (args.secure) return getTls(path, token);
    const res = await fetch(url + path);
    return { status: res.status, body: await res.text() };
  };
  const p: PodvolProcess = {
    url,
    proc,
    output: () => out,
    logLines: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    get,
    status: async () => JSON.parse((await get('/status')).body) as StatusDoc,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  await waitFor(
    'podvol to listen',
    async () => (await get('/healthz')).status === 200 || undefined,
    // Generous: on a machine shared by several test runs, loading the daemon alone can take 20 s.
    90_000,
  ).catch((err) => {
    proc.kill('SIGKILL');
    throw new Error(`${err.message}\n${out}`);
  });
  return p;
}

/** Resolves once `path` no longer exists (e.g. a torn-down pod's directory). */
export async function waitGone(what: string, path: string, timeoutMs?: number): Promise<void> {
  await waitFor(
    what,
    async () => {
      try {
        await lstat(path);
        return false;
      } catch {
        return true;
      }
    },
    timeoutMs,
  );
}
