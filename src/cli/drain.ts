// `podvol drain`: with the daemon stopped, take down every volume under a root
// directory (the cleanup after `npm start`, before an uninstall, or to hand a
// node back). Exit codes: 0 drained (or nothing to drain, or a dry run), 1 the
// daemon still runs, or something could not be taken down (each named on
// stderr), 2 usage error.
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import type { DrainReport } from '../agent/drain.ts';
import { createLogger, type LogFormat } from '../agent/logger.ts';
import { escapeControl, escapeControlJSON } from '../agent/ops/escape.ts';
import { lockRootDir, RootDirLockedError } from '../agent/root-lock.ts';
import { errnoCode, errorMessage } from '../errno.ts';
import { nodeFsOps } from '../volumehost/fs.ts';
import { EXIT_FAILURE, EXIT_OK, helpNotes, setExitCode } from './command.ts';
import { applyConfigFile, configOption } from './config-file.ts';
import { formatDuration } from './duration.ts';
import {
  defaultNodeName,
  durationArg,
  logFormatOption,
  logLevelOption,
  rootDirOption,
  systemdScopeOption,
} from './options.ts';

interface DrainFlags {
  rootDir: string;
  dryRun: boolean;
  timeout: number;
  output: 'text' | 'json';
  logLevel: string;
  logFormat: LogFormat;
  systemdScope: 'auto' | 'off';
}

function formatReport(r: DrainReport): string {
  const lines: string[] = [];
  const would = r.dryRun ? 'would ' : '';
  lines.push(
    r.dryRun ? `podvol drain --dry-run of ${r.rootDir}: nothing was changed` : `podvol drain of ${r.rootDir}`,
  );
  for (const v of r.volumes) {
    const pod = v.pod ? `${v.pod} (${v.podUID})` : v.podUID;
    lines.push(`${would}tear down volume ${v.volume} (${v.plugin}) of pod ${pod}: ${v.path}`);
  }
  for (const d of r.podDirs)
    lines.push(`${would}remove pod directory ${d}${r.dryRun ? ', once nothing is mounted below it' : ''}`);
  if (r.dryRun) for (const m of r.mounts) lines.push(`mounted now: ${m}`);
  const failed = new Set(r.leftovers.map((l) => l.what));
  if (!r.dryRun) {
    lines.push(
      r.leftovers.length === 0
        ? `drained: ${r.volumes.length} volumes torn down, ${r.podDirs.length} pod directories removed`
        : `not drained: ${failed.size} left (see stderr)`,
    );
  }
  return `${lines.join('\n')}\n`;
}

async function runDrain(flags: DrainFlags): Promise<number> {
  const requested = resolve(flags.rootDir);
  try {
    if (!(await nodeFsOps().stat(requested)).isDirectory())
      throw new Error(`${requested} is not a directory`);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') {
      process.stdout.write(escapeControl(`podvol drain: nothing to drain: ${requested} does not exist\n`));
      return EXIT_OK;
    }
    process.stderr.write(escapeControl(`podvol drain: ${errorMessage(err)}\n`));
    return EXIT_FAILURE;
  }
  // As the daemon: symlinks in the root directory's own path are followed once, here (src/mount/target.ts).
  const rootDir = await nodeFsOps().realpath(requested);
  if (!flags.dryRun && process.getuid?.() !== 0) {
    process.stderr.write(
      `podvol drain: must run as root to unmount volumes (this is uid ${process.getuid?.()}); --dry-run works without\n`,
    );
    return EXIT_FAILURE;
  }
  let lock: Awaited<ReturnType<typeof lockRootDir>>;
  try {
    lock = await lockRootDir(rootDir, 'drain');
  } catch (err) {
    if (!(err instanceof RootDirLockedError)) throw err;
    process.stderr.write(escapeControl(`podvol drain: ${err.message}\n`));
    return EXIT_FAILURE;
  }
  try {
    // Logs go to stderr: stdout is the report.
    const logger = createLogger(flags.logLevel, { format: flags.logFormat, fd: 2 });
    // Loaded here, not at the top: only a drain needs the volume plugins.
    const { drain } = await import('../agent/drain.ts');
    const { createVolumeStack } = await import('../agent/volume-stack.ts');
    const stack = createVolumeStack({
      rootDir,
      nodeName: defaultNodeName(),
      logger,
      systemdScope: flags.systemdScope,
    });
    const report = await drain({ rootDir, stack, logger, dryRun: flags.dryRun, timeoutMs: flags.timeout });
    logger.flush();
    process.stdout.write(
      flags.output === 'json'
        ? escapeControlJSON(`${JSON.stringify(report, null, 2)}\n`)
        : escapeControl(formatReport(report)),
    );
    for (const l of report.leftovers)
      process.stderr.write(escapeControl(`podvol drain: ${l.what}: ${l.reason}: ${l.message}\n`));
    return report.leftovers.length > 0 ? EXIT_FAILURE : EXIT_OK;
  } finally {
    await lock.release();
  }
}

export function drainCommand(program: Command): void {
  program
    .command('drain')
    .description(
      'with podvol stopped: tear down every volume under the root directory and remove the pod directories',
    )
    .addOption(configOption())
    .hook('preAction', (c) => applyConfigFile(c, false))
    .addOption(rootDirOption())
    .addOption(
      new Option('--dry-run', 'print what would be torn down and removed; change nothing').default(false),
    )
    .addOption(
      new Option('--timeout <duration>', 'how long to keep retrying teardowns that fail (e.g. a busy volume)')
        .default(60_000, formatDuration(60_000))
        .argParser(durationArg('--timeout')),
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addOption(systemdScopeOption())
    .addOption(logLevelOption('warn', ' (stderr)'))
    .addOption(logFormatOption())
    .addHelpText(
      'after',
      helpNotes(
        "\nStop the daemon first (systemctl stop podvol); a running podvol holds the root directory and drain exits 1.\nVolumes go as a deleted pod's volumes go in the daemon (TearDown through their plugin, then the pod directory once nothing is mounted below it). Nothing outside the pod directories and podvol's records is touched.\nExit codes: 0 drained (or nothing to drain, or a dry run), 1 podvol is running or something remains (named on stderr), 2 usage error.",
      ),
    )
    .action(async (flags: DrainFlags, cmd: Command) => {
      setExitCode(cmd, await runDrain(flags));
    });
}
