// The podvol command line. Each command lives in its own module under
// src/cli/ and registers itself here; a new command is a new module plus one
// line in `commands`. A bad flag or value is a usage error: one line on
// stderr and exit code 2, never a stack trace.
import { Command, CommanderError } from 'commander';
import { type CommandModule, exitCodeOf, helpConfiguration } from './cli/command.ts';
import { drainCommand } from './cli/drain.ts';
import { mountsCommand } from './cli/mounts.ts';
import { planCommand } from './cli/plan.ts';
import { runCommand } from './cli/run.ts';
import { statusCommand } from './cli/status.ts';
import { versionCommand, versionLine } from './cli/version.ts';
import { waitCommand } from './cli/wait.ts';
import { errorMessage } from './errno.ts';
import { version } from './version.ts';

export { version };

/** The commands, in the order `podvol --help` lists them. */
const commands: CommandModule[] = [
  runCommand,
  statusCommand,
  planCommand,
  drainCommand,
  mountsCommand,
  waitCommand,
  versionCommand,
];

export function buildProgram(): Command {
  const program = new Command('podvol')
    .description("Sets up and tears down pod volumes on this node, as kubelet's volume manager does")
    .version(versionLine(), '-v, --version')
    .exitOverride()
    // Before the commands are added: they inherit it.
    .configureHelp(helpConfiguration)
    // commander prints an error and then a hint on a second line; an operator's
    // script or journal gets one line: the error, then the hint.
    .configureOutput({ outputError: (text, write) => write(oneLineUsageError(text)) });
  for (const register of commands) register(program);
  return program;
}

export function oneLineUsageError(text: string): string {
  const message = text
    .replace(/^error: /, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim();
  return `podvol: ${message} (run podvol --help for usage)\n`;
}

/** Returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  // `podvol status | head`: a reader that goes away is not an error worth a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (
        err.code === 'commander.helpDisplayed' ||
        err.code === 'commander.version' ||
        err.code === 'commander.help'
      )
        return 0;
      return 2;
    }
    process.stderr.write(`podvol: ${errorMessage(err)}\n`);
    return 1;
  }
  return exitCodeOf(program);
}
