// The only place the mount layer starts processes. Commands are argv arrays
// (never a shell) and always carry a timeout. The runner is a plain function
// so tests can wrap it to count or fake what gets started.
import { constants } from 'node:os';
import { Worker } from 'node:worker_threads';
import { execa } from 'execa';
import { loadAddon } from '../addon.ts';
import { errnoCode } from '../errno.ts';

export interface RunRequest {
  /** Binary name or path, e.g. `mount`. */
  file: string;
  args: readonly string[];
  /** Deadline for the whole command; on expiry it is killed (SIGTERM, then SIGKILL). */
  timeoutMs: number;
}

export interface RunResult {
  /** undefined when the process was killed by a signal or never started. */
  exitCode: number | undefined;
  signal: string | undefined;
  /** stdout and stderr interleaved. */
  output: string;
  timedOut: boolean;
  /** Set when the process could not be started at all (e.g. ENOENT for a missing binary). */
  spawnErrorCode: string | undefined;
  /**
   * Settles when the process has really exited. After a timed-out result it
   * may still be pending: a process stuck in uninterruptible sleep outlives
   * SIGKILL, and callers that must not start another one meanwhile (one stat
   * probe per path, deadline-stat.ts) wait for this. Absent from fakes.
   */
  exited?: Promise<void>;
}

export type CommandRunner = (req: RunRequest) => Promise<RunResult>;

/** Grace after SIGTERM before SIGKILL. */
const KILL_GRACE_MS = 2000;

/** The result a runner gives for a process that outlived its deadline, the kill and the grace. */
const abandonedResult = (): RunResult => ({
  exitCode: undefined,
  signal: undefined,
  output: '',
  timedOut: true,
  spawnErrorCode: undefined,
});

/** The result a runner gives for a process that could not be started (`code`: the errno's name). */
const spawnFailedResult = (code: string): RunResult => ({
  ...abandonedResult(),
  timedOut: false,
  spawnErrorCode: code,
});

/**
 * Resolves with `finished`, or with an abandoned result at the deadline plus
 * the kill grace (and a second) if the process never exits; `exited` tells
 * when it finally does.
 */
async function withAbandon(finished: Promise<RunResult>, timeoutMs: number): Promise<RunResult> {
  const exited = finished.then(
    () => {},
    () => {},
  );
  let timer: NodeJS.Timeout | undefined;
  const abandoned = new Promise<RunResult>((resolve) => {
    timer = setTimeout(() => resolve(abandonedResult()), timeoutMs + KILL_GRACE_MS + 1000);
    timer.unref();
  });
  try {
    return { ...(await Promise.race([finished, abandoned])), exited };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs commands with execa under `LC_ALL=C` (mount-utils matches English
 * umount output). A process stuck in uninterruptible sleep (dead NFS) survives
 * SIGKILL, so the result is returned at the deadline plus the kill grace even
 * if the child never exits; the child is then left to the kernel.
 */
export function createExecaRunner(): CommandRunner {
  return (req) => {
    const child = execa(req.file, [...req.args], {
      reject: false,
      all: true,
      stdin: 'ignore',
      timeout: req.timeoutMs,
      forceKillAfterDelay: KILL_GRACE_MS,
      env: { LC_ALL: 'C', LANG: 'C' },
      stripFinalNewline: true,
    });
    const finished = child.then((r): RunResult => {
      const code = errnoCode(r);
      const spawnFailed = r.failed && r.exitCode === undefined && !r.timedOut && r.signal === undefined;
      return {
        exitCode: r.exitCode,
        signal: r.signal,
        output: typeof r.all === 'string' ? r.all : '',
        timedOut: r.timedOut,
        spawnErrorCode: spawnFailed ? code : undefined,
      };
    });
    return withAbandon(finished, req.timeoutMs);
  };
}

/** What the spawning thread sends back for one request. */
type ThreadResult = Omit<RunResult, 'exited'> & { id: number };

/**
 * The body of the spawning thread, evaluated as CommonJS from its source
 * text (Function.prototype.toString): it needs only node's own modules, so it
 * runs the same from the sources, the bundle and the single executable,
 * where no module file exists for a worker to load (nor execa to import).
 * Same contract as createExecaRunner: argv, no shell, the C locale, stdout and
 * stderr interleaved, SIGTERM at the deadline and SIGKILL after the grace.
 */
function spawningThread(
  require: (id: string) => unknown,
  port: import('node:worker_threads').MessagePort,
  killGraceMs: number,
): void {
  // require() is untyped; node:child_process is what it returns for this name.
  const { spawn } = require('node:child_process') as typeof import('node:child_process');
  const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  port.on('message', (req: RunRequest & { id: number }) => {
    const chunks: Buffer[] = [];
    let timedOut = false;
    let spawnErrorCode: string | undefined;
    let done = false;
    const child = spawn(req.file, [...req.args], { env, stdio: ['ignore', 'pipe', 'pipe'], shell: false });
    child.stdout?.on('data', (b: Buffer) => chunks.push(b));
    child.stderr?.on('data', (b: Buffer) => chunks.push(b));
    let kill: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      kill = setTimeout(() => child.kill('SIGKILL'), killGraceMs);
    }, req.timeoutMs);
    const finish = (exitCode: number | null, signal: NodeJS.Signals | null) => {
      if (done) return;
      done = true;
      clearTimeout(deadline);
      clearTimeout(kill);
      const output = Buffer.concat(chunks)
        .toString('utf8')
        .replace(/\r?\n$/, '');
      const result: ThreadResult = {
        id: req.id,
        exitCode: spawnErrorCode || exitCode === null ? undefined : exitCode,
        signal: signal ?? undefined,
        output,
        timedOut,
        spawnErrorCode,
      };
      port.postMessage(result);
    };
    child.on('error', (err: NodeJS.ErrnoException) => {
      // Only a failed spawn reports here without a 'close' to follow.
      if (child.pid === undefined) {
        spawnErrorCode = err.code ?? 'ESPAWN';
        finish(null, null);
      }
    });
    child.on('close', finish);
  });
}

/** A runner whose processes are started off the event loop; close() ends its thread. */
export type ThreadRunner = CommandRunner & { close(): Promise<void> };

/**
 * createExecaRunner's contract, but every process is started from one worker
 * thread. Starting a process forks the daemon, and fork copies the page
 * tables of the whole process on the calling thread: 2 to 10 ms of a
 * blocked event loop per mount or umount at the daemon's size (more on a
 * loaded machine), two thousand of them for a pod with a thousand volumes,
 * which was most of /healthz's tail latency (README, Bounded work). The
 * thread is started on first use and does not keep the process alive while
 * no command runs.
 */
export function createThreadRunner(): ThreadRunner {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, (r: RunResult) => void>();
  const failAll = (code: string) => {
    for (const [id, resolve] of pending) {
      pending.delete(id);
      resolve(spawnFailedResult(code));
    }
  };
  const thread = (): Worker => {
    if (worker) return worker;
    const w = new Worker(
      `(${spawningThread.toString()})(require, require('node:worker_threads').parentPort, ${KILL_GRACE_MS})`,
      { eval: true, name: 'podvol-spawn', stdout: false, stderr: false },
    );
    w.on('message', (r: ThreadResult) => {
      const resolve = pending.get(r.id);
      pending.delete(r.id);
      const { id: _, ...result } = r;
      resolve?.(result);
    });
    // The thread died (it should not): its commands' results are lost, so they fail; the next starts a new one.
    const lost = () => {
      if (worker === w) worker = undefined;
      failAll('EWORKER');
    };
    w.on('error', lost);
    w.on('exit', lost);
    worker = w;
    return w;
  };
  // Commands whose result someone waits for: the thread keeps the process alive only while there are any.
  let waiting = 0;
  const run: CommandRunner = async (req) => {
    const id = nextId++;
    const finished = new Promise<RunResult>((resolve) => pending.set(id, resolve));
    const w = thread();
    waiting++;
    w.ref();
    w.postMessage({ id, file: req.file, args: [...req.args], timeoutMs: req.timeoutMs });
    try {
      return await withAbandon(finished, req.timeoutMs);
    } finally {
      // An abandoned process (stuck in the kernel) no longer holds the process open.
      if (--waiting === 0) worker?.unref();
    }
  };
  return Object.assign(run, {
    async close() {
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  });
}

/** native/spawn (spawn.c says what each function does). */
type SpawnAddon = {
  available(): boolean;
  start(
    file: string,
    argv: string[],
    env: string[],
    done: (exitCode: number | null, signal: number | null, output: Buffer, spawnError?: string) => void,
  ): unknown;
  kill(handle: unknown, signal: number): boolean;
  unref(handle: unknown): void;
};

const signalNames: ReadonlyMap<number, string> = new Map(
  Object.entries(constants.signals).map(([name, n]) => [n, name]),
);

/**
 * createExecaRunner's contract, with every process started by posix_spawn
 * through native/spawn: no fork, so no copy of the daemon's page tables, and
 * the event loop does not wait for the start at all (the addon's thread
 * waits until the child has called execve). Undefined when the addon is not built or the
 * kernel lacks pidfds (Linux < 5.4); `addon` names another file (tests).
 */
export function createSpawnRunner(addon?: URL): CommandRunner | undefined {
  let native: SpawnAddon;
  try {
    native = loadAddon<SpawnAddon>('spawn', addon);
    if (!native.available()) return undefined;
  } catch {
    return undefined;
  }
  const env = Object.entries({ ...process.env, LC_ALL: 'C', LANG: 'C' }).flatMap(([k, v]) =>
    v === undefined ? [] : [`${k}=${v}`],
  );
  return async (req) => {
    let handle: unknown;
    let timedOut = false;
    let deadline: NodeJS.Timeout | undefined;
    let kill: NodeJS.Timeout | undefined;
    const finished = new Promise<RunResult>((resolve) => {
      try {
        handle = native.start(
          req.file,
          [req.file, ...req.args],
          env,
          (exitCode, signal, output, spawnError) => {
            clearTimeout(deadline);
            clearTimeout(kill);
            if (spawnError !== undefined) {
              resolve(spawnFailedResult(spawnError));
              return;
            }
            resolve({
              exitCode: exitCode ?? undefined,
              signal: signal === null ? undefined : signalNames.get(signal),
              output: output.toString('utf8').replace(/\r?\n$/, ''),
              timedOut,
              spawnErrorCode: undefined,
            });
          },
        );
      } catch (err) {
        resolve(spawnFailedResult(errnoCode(err) ?? 'ESPAWN'));
        return;
      }
      deadline = setTimeout(() => {
        timedOut = true;
        native.kill(handle, constants.signals.SIGTERM);
        kill = setTimeout(() => native.kill(handle, constants.signals.SIGKILL), KILL_GRACE_MS);
      }, req.timeoutMs);
    });
    try {
      return await withAbandon(finished, req.timeoutMs);
    } finally {
      // An abandoned process (stuck in the kernel) no longer holds the process open; a no-op once it exited.
      if (handle !== undefined) native.unref(handle);
    }
  };
}

/**
 * The daemon's runner: posix_spawn through the addon, or, without it, the
 * spawning thread (forks, but off the event loop).
 */
export function createRunner(): CommandRunner {
  return createSpawnRunner() ?? createThreadRunner();
}

/** A runner that remembers every request before passing it on; tests use it to prove what ran. */
export function recordingRunner(inner: CommandRunner): CommandRunner & { calls: RunRequest[] } {
  const calls: RunRequest[] = [];
  const run = (req: RunRequest) => {
    calls.push({ file: req.file, args: [...req.args], timeoutMs: req.timeoutMs });
    return inner(req);
  };
  return Object.assign(run, { calls });
}
