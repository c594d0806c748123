// What every command module under src/cli/ shares: how a command registers
// itself and how it hands its exit code back to main().
import type { Command } from 'commander';
import { escapeControl } from '../agent/ops/escape.ts';

/** A command module adds its one command (name, options, action) to the program. */
export type CommandModule = (program: Command) => void;

/** Exit codes shared by every command. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
/** status, mounts, wait: no podvol answered (or it answered with something unusable). */
export const EXIT_UNREACHABLE = 3;

/** Records a command's exit code for main() to return. */
export function setExitCode(cmd: Command, code: number): void {
  (cmd.parent ?? cmd).setOptionValue('exitCode', code);
}

/** The exit code a command recorded with setExitCode (commander keeps option values untyped). */
export function exitCodeOf(program: Command): number {
  const code: unknown = program.getOptionValue('exitCode');
  return typeof code === 'number' ? code : EXIT_OK;
}

/** A string option's value (commander keeps option values untyped); undefined when unset. */
export function stringOption(cmd: Command, name: string): string | undefined {
  const value: unknown = cmd.getOptionValue(name);
  return typeof value === 'string' ? value : undefined;
}

/** Prints a one-line usage error and returns EXIT_USAGE, for checks commander cannot express. */
export function usageError(message: string): number {
  process.stderr.write(escapeControl(`podvol: ${message} (run podvol --help for usage)\n`));
  return EXIT_USAGE;
}
