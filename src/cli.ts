// The podvol command line. Each command lives in its own module under
// src/cli/ and registers itself here; a new command is a new module plus one
// line in `commands`. A bad flag or value is a usage error: one line on
// stderr and exit code 2, never a stack trace.
import { Command, CommanderError } from 'commander';
import type { CommandModule } from './cli/command.ts';
import { mountsCommand } from './cli/mounts.ts';
import { planCommand } from './cli/plan.ts';
import { runCommand } from './cli/run.ts';
import { statusCommand } from './cli/status.ts';
import { versionCommand } from './cli/version.ts';
import { waitCommand } from './cli/wait.ts';
import { version } from './version.ts';

export { version };

/** The commands, in the order `podvol --help` lists them. */
const commands: CommandModule[] = [
  runCommand,
  statusCommand,
  planCommand,
  mountsCommand,
  waitCommand,
  versionCommand,
];

export function buildProgram(): Command {
  const program = new Command('podvol')
    .description("Sets up and tears down pod volumes on this node, as kubelet's volume manager does")
    .version(version, '-v, --version')
    .exitOverride()
    .showHelpAfterError('(run podvol --help for usage)');
  for (const register of commands) register(program);
  return program;
}

/** Returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
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
    process.stderr.write(`podvol: ${(err as Error).message}\n`);
    return 1;
  }
  return (program.getOptionValue('exitCode') as number | undefined) ?? 0;
}
