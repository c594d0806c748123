// `podvol version`.
import type { Command } from 'commander';
import { version } from '../version.ts';

export function versionCommand(program: Command): void {
  program
    .command('version')
    .description('print the version')
    .action(() => {
      process.stdout.write(`podvol ${version} (node ${process.version})\n`);
    });
}
