// Errors of the mount layer. Everything here is safe to log: arguments are
// stored already masked, so a MountError can go straight into an Event.
import { errnoCode } from '../errno.ts';
import type { MountHolder } from './holders.ts';

/** errno codes that mean "something is mounted here but it is broken" (mount-utils IsCorruptedMnt). */
export const CORRUPTED_MOUNT_CODES: ReadonlySet<string> = new Set([
  'ENOTCONN',
  'ESTALE',
  'EIO',
  'EACCES',
  'EHOSTDOWN',
  // EWOULDBLOCK has the same value as EAGAIN on Linux and libuv reports it as EAGAIN.
  'EWOULDBLOCK',
  'EAGAIN',
  'ENODEV',
]);

/** True when `err` is an fs error whose code marks a corrupted (stale, disconnected) mount. */
export function isCorruptedMountError(err: unknown): boolean {
  const code = errnoCode(err);
  return code !== undefined && CORRUPTED_MOUNT_CODES.has(code);
}

/** True for an fs error with code ENOENT. */
export function isNotExistError(err: unknown): boolean {
  return errnoCode(err) === 'ENOENT';
}

export type MountOperation = 'mount' | 'unmount' | 'probe';

export interface MountErrorDetails {
  operation: MountOperation;
  /** The binary that ran, e.g. `mount`, `umount`, `systemd-run`. */
  command: string;
  /** Its arguments with every sensitive option replaced by `<masked>`. */
  args: readonly string[];
  /** stdout and stderr interleaved, sensitive values masked. */
  output: string;
  exitCode?: number;
  signal?: string;
  timedOut: boolean;
  /** A short machine-readable cause, when it can be told: EBUSY for "target is busy". */
  code?: string;
  /** What went wrong, before the command/arguments/output lines. */
  reason: string;
  /** For a busy unmount: the processes holding the mount (found through /proc). */
  holders?: readonly MountHolder[];
}

/**
 * A failed mount or umount. The message follows mount-utils:
 * `mount failed: <reason>\nMounting command: <cmd>\nMounting arguments: <args>\nOutput: <out>`.
 */
export class MountError extends Error {
  readonly operation: MountOperation;
  readonly command: string;
  readonly args: readonly string[];
  readonly output: string;
  readonly exitCode: number | undefined;
  readonly signal: string | undefined;
  readonly timedOut: boolean;
  readonly code: string | undefined;
  readonly holders: readonly MountHolder[];

  constructor(d: MountErrorDetails) {
    const argText = d.args.join(' ');
    const message =
      d.operation === 'unmount'
        ? `unmount failed: ${d.reason}\nUnmounting command: ${d.command}\nUnmounting arguments: ${argText}\nOutput: ${d.output}`
        : `${d.operation} failed: ${d.reason}\nMounting command: ${d.command}\nMounting arguments: ${argText}\nOutput: ${d.output}`;
    super(message);
    this.name = 'MountError';
    this.operation = d.operation;
    this.command = d.command;
    this.args = d.args;
    this.output = d.output;
    this.exitCode = d.exitCode;
    this.signal = d.signal;
    this.timedOut = d.timedOut;
    this.code = d.code;
    this.holders = d.holders ?? [];
  }
}

export interface OptionProblem {
  /** The offending option as it may be shown (sensitive ones are `<masked>`). */
  option: string;
  problem: string;
}

/** Options, source, target or flags refused before anything was executed. */
export class MountOptionError extends Error {
  readonly code = 'EINVALIDMOUNTOPTION';
  readonly fstype: string;
  readonly problems: readonly OptionProblem[];

  constructor(fstype: string, problems: readonly OptionProblem[]) {
    const list = problems.map((p) => `${JSON.stringify(p.option)}: ${p.problem}`).join('; ');
    super(`refused mount request (fstype ${JSON.stringify(fstype || '(none)')}), nothing was run: ${list}`);
    this.name = 'MountOptionError';
    this.fstype = fstype;
    this.problems = problems;
  }
}

/** /proc/self/mountinfo could not be parsed or read consistently. */
export class MountInfoError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MountInfoError';
  }
}

/** What mount(8) says of a target that does not exist: one error for the real and the fake mounter. */
export function mountPointMissing(target: string): MountError {
  return new MountError({
    operation: 'mount',
    command: 'mount',
    args: [target],
    output: `mount: ${target}: mount point does not exist.`,
    exitCode: 32,
    timedOut: false,
    reason: 'exit status 32',
  });
}
