// `podvol version`.
import type { Command } from 'commander';
import { version } from '../version.ts';

/** What `podvol version` and `podvol -v` print: one line, so both say the same. */
export const versionLine = () => `podvol ${version} (node ${process.version})`;

export function versionCommand(program: Command): void {
  program
    .command('version')
    .description('print the version')
    .action(() => {
      process.stdout.write(`${versionLine()}\n`);
    });
}
