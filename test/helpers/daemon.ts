// Runs `podvol run` as a child process (inside the test's mount namespace) and
// gives tests its HTTP endpoints, its log lines and ways to stop or kill it.
// The benches' daemons are these too (bench/lib.ts adds what they measure).
import { type ChildProcess, spawn } from 'node:child_process';
import { lstat, mkdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { StatusDocument } from '../../src/agent/ops/status.ts';
import { errorMessage } from '../../src/errno.ts';
import { httpsRequest } from './https.ts';
import { listenLocal } from './listen.ts';

export const repoRoot = join(import.meta.dirname, '..', '..');

/** Where startPodvol's daemon serves the runtime API: beside the root dir, in the test's temp dir. */
export const runtimeSocketOf = (rootDir: string) => join(rootDir, '..', 'run', 'podvol.sock');

/** A daemon's directories in a test's temp dir `base`: its root (podvol creates it) and an empty manifest directory. */
export async function daemonDirs(base: string): Promise<{ root: string; manifests: string }> {
  const manifests = join(base, 'manifests');
  await mkdir(manifests);
  return { root: join(base, 'root'), manifests };
}

/** A port no one listened on a moment ago (for a child process to listen on). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  const port = await listenLocal(srv);
  await new Promise((resolve) => srv.close(resolve));
  return port;
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
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}${lastErr ? `: ${errorMessage(lastErr)}` : ''}`);
}

/** One JSON log line of podvol's. */
export type LogLine = { msg?: string; pod?: string; volume?: string; [k: string]: unknown };

export interface PodvolOptions {
  rootDir: string;
  manifests?: string;
  kubeconfig?: string;
  /** --node-name; testnode unless given. */
  nodeName?: string;
  extra?: string[];
  env?: Record<string, string>;
  /**
   * Listen on 0.0.0.0: podvol then serves HTTPS with authentication, and the helper
   * trusts the self-signed certificate it generates under <rootDir>/pki.
   */
  secure?: boolean;
  /** Node's own flags for podvol (e.g. --cpu-prof), before its script. */
  nodeArgs?: string[];
  /** The podvol entry point to run; this checkout's bin/podvol.js unless given (benches compare another commit's). */
  bin?: string;
  /** A command podvol runs under (e.g. strace -f -o <file>), its arguments before node's. */
  wrap?: string[];
  /**
   * Keep the whole output for output() and logLines() (the default). Benches
   * whose daemons log thousands of lines say false: output() is then the last
   * 4,000 characters of stderr, logLines() empty, and onLine() still sees every line.
   */
  keepOutput?: boolean;
}

export interface PodvolProcess {
  url: string;
  proc: ChildProcess;
  /** performance.now() when the process was spawned. */
  spawnedAt: number;
  output(): string;
  logLines(): LogLine[];
  /** Calls `fn` for every JSON log line as it arrives (with performance.now() of its arrival); returns the way to stop. */
  onLine(fn: (line: LogLine, at: number) => void): () => void;
  /** GET with an optional bearer token (sent only to a secured, non-loopback listener). */
  get(path: string, token?: string): Promise<{ status: number; body: string }>;
  status(): Promise<StatusDocument>;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `podvol run` as a child process, its log lines read as they come; not waited for (startPodvol waits). */
export async function spawnPodvol(o: PodvolOptions): Promise<PodvolProcess> {
  const port = await freePort();
  const argv = [
    ...(o.nodeArgs ?? []),
    o.bin ?? join(repoRoot, 'bin', 'podvol.js'),
    'run',
    '--root-dir',
    o.rootDir,
    '--listen',
    `${o.secure ? '0.0.0.0' : '127.0.0.1'}:${port}`,
    '--node-name',
    o.nodeName ?? 'testnode',
    ...(o.manifests ? ['--pod-manifest-path', o.manifests] : []),
    ...(o.kubeconfig ? ['--kubeconfig', o.kubeconfig] : []),
    // Never the global /run/podvol: each daemon has its own socket.
    '--runtime-socket',
    runtimeSocketOf(o.rootDir),
    ...(o.extra ?? []),
  ];
  const [command = process.execPath, ...args] = [...(o.wrap ?? []), process.execPath, ...argv];
  const spawnedAt = performance.now();
  const proc = spawn(command, args, {
    env: { ...process.env, ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = o.keepOutput ?? true;
  let out = '';
  const lines: LogLine[] = [];
  const listeners = new Set<(line: LogLine, at: number) => void>();
  let partial = '';
  proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    const at = performance.now();
    if (keep) out += chunk;
    const complete = (partial + chunk).split('\n');
    partial = complete.pop() ?? '';
    for (const l of complete) {
      if (!l.startsWith('{')) continue;
      let line: LogLine;
      try {
        line = JSON.parse(l);
      } catch {
        continue;
      }
      if (keep) lines.push(line);
      for (const fn of listeners) fn(line, at);
    }
  });
  proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    out = keep ? out + chunk : (out + chunk).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const url = `${o.secure ? 'https' : 'http'}://127.0.0.1:${port}`;
  const getTls = async (path: string, token?: string) =>
    httpsRequest(url + path, { ca: await readFile(join(o.rootDir, 'pki', 'podvol.crt'), 'utf8'), token });
  const get = async (path: string, token?: string) => {
    if (o.secure) return getTls(path, token);
    const res = await fetch(url + path);
    return { status: res.status, body: await res.text() };
  };
  return {
    url,
    proc,
    spawnedAt,
    output: () => out,
    logLines: () => lines,
    onLine(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    get,
    status: async () => JSON.parse((await get('/status')).body),
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/**
 * spawnPodvol, resolved once /healthz answers 200. freePort's port can be
 * taken by another test's listener before podvol binds it (tests run in
 * parallel): a podvol that exits saying so is started again on a new port.
 */
export async function startPodvol(o: PodvolOptions): Promise<PodvolProcess> {
  for (let attempt = 1; ; attempt++) {
    const p = await spawnPodvol(o);
    // Its output is complete once its pipes have closed ('exit' can come first).
    const closed = new Promise((r) => p.proc.once('close', r));
    // Generous: on a machine shared by several test runs, loading the daemon alone can take 20 s.
    const deadline = Date.now() + 90_000;
    let lastErr: unknown;
    while (Date.now() < deadline && p.proc.exitCode === null && p.proc.signalCode === null) {
      try {
        if ((await p.get('/healthz')).status === 200) return p;
      } catch (err) {
        lastErr = err;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const exited = p.proc.exitCode !== null || p.proc.signalCode !== null;
    p.proc.kill('SIGKILL');
    await Promise.race([closed, new Promise((r) => setTimeout(r, 5_000).unref())]);
    if (exited && attempt < 3 && /address already in use/.test(p.output())) continue;
    const why = exited
      ? `podvol exited (${p.proc.exitCode ?? p.proc.signalCode}) before it listened`
      : `timed out waiting for podvol to listen${lastErr ? `: ${errorMessage(lastErr)}` : ''}`;
    throw new Error(`${why}\n${p.output()}`);
  }
}

/** Volume `volume` of the pod named (or with the uid) `pod` in the daemon's /status. */
export async function volumeOf(p: PodvolProcess, pod: string, volume = 'data') {
  return (await p.status()).pods
    .find((x) => x.name === pod || x.uid === pod)
    ?.volumes.find((v) => v.name === volume);
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
