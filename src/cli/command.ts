// What every command module under src/cli/ shares: how a command registers
// itself and how it hands its exit code back to main().
import { Command, Help } from 'commander';
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

/**
 * The width help is wrapped to: the terminal's, at most 100 columns (80 off a
 * terminal, as commander does), for every command alike.
 */
export const helpWidth = (): number =>
  Math.min(process.stdout.isTTY && process.stdout.columns ? process.stdout.columns : 80, 100);

/**
 * commander gives every flag's description the column after the widest flag,
 * and stops wrapping when that leaves under 40 columns: run's
 * `--authorization-webhook-cache-authorized-ttl <duration>` pushed every line
 * of run --help to 200 columns. Here a flag too wide for the column is on a
 * line of its own, its description wrapped below it in the column.
 */
export const helpConfiguration: Partial<Help> = {
  helpWidth: helpWidth(),
  formatItem(term, termWidth, description, helper) {
    const width = helper.helpWidth ?? 80;
    // Two columns of indent and two between flag and description, as commander lays them out.
    const column = Math.min(termWidth, width - 4 - helper.minWidthToWrap);
    if (!description || helper.displayWidth(term) <= column)
      return Help.prototype.formatItem.call(helper, term, column, description, helper);
    return `  ${term}\n${Help.prototype.formatItem.call(helper, '', column, description, helper)}`;
  },
};

/** A command's notes after its help (addHelpText 'after'), wrapped as the flags are. */
export const helpNotes = (text: string) => () => new Help().boxWrap(text, helpWidth());

/**
 * commander's "did you mean" (the one it shows for a mistyped flag or
 * command) for a word podvol parses itself: `--${word}` is parsed by a
 * command that has only `flags`, and the flag commander suggests is returned.
 */
export function suggestFlag(word: string, flags: readonly string[]): string | undefined {
  const probe = new Command().exitOverride().configureOutput({ outputError: () => {} });
  for (const f of flags) probe.option(f);
  try {
    probe.parse([`--${word}`], { from: 'user' });
  } catch (err) {
    return /\(Did you mean (--\S+)\?\)/.exec(err instanceof Error ? err.message : '')?.[1];
  }
  return undefined;
}
