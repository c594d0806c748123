// The only place the mount layer starts processes. Commands are argv arrays
// (execa never uses a shell here) and always carry a timeout. The runner is a
// plain function so tests can wrap it to count or fake what gets started.
import { execa } from 'execa';
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
}

export type CommandRunner = (req: RunRequest) => Promise<RunResult>;

/** Grace after SIGTERM before SIGKILL. */
const KILL_GRACE_MS = 2000;

/**
 * Runs commands with execa under `LC_ALL=C` (mount-utils matches English
 * umount output). A process stuck in uninterruptible sleep (dead NFS) survives
 * SIGKILL, so the result is returned at the deadline plus the kill grace even
 * if the child never exits; the child is then left to the kernel.
 */
export function createExecaRunner(): CommandRunner {
  return async (req) => {
    const child = execa(req.file, [...req.args], {
      reject: false,
      all: true,
      stdin: 'ignore',
      timeout: req.timeoutMs,
      forceKillAfterDelay: KILL_GRACE_MS,
      env: { LC_ALL: 'C', LANG: 'C' },
      stripFinalNewline: true,
    });
    let timer: NodeJS.Timeout | undefined;
    const abandoned = new Promise<RunResult>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            exitCode: undefined,
            signal: undefined,
            output: '',
            timedOut: true,
            spawnErrorCode: undefined,
          }),
        req.timeoutMs + KILL_GRACE_MS + 1000,
      );
      timer.unref();
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
    try {
      return await Promise.race([finished, abandoned]);
    } finally {
      clearTimeout(timer);
    }
  };
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
