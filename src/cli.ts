// The podvol command line. A bad flag or value is a usage error: one line on
// stderr and exit code 2, never a stack trace.
import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { nodeNameOption, rootDirOption } from './agent/cli-options.ts';
import { startDaemon } from './agent/daemon.ts';
import { parseListen } from './agent/http.ts';
import { createLogger, logLevels } from './agent/logger.ts';
import { registerOperatorCommands } from './agent/ops/commands.ts';

export const version: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
).version;

const asListen = (v: string) => {
  try {
    return parseListen(v);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};

const positiveSeconds = (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError(`must be a positive number of seconds, got "${v}"`);
  return n;
};

interface RunFlags {
  rootDir: string;
  nodeName: string;
  podManifestPath?: string;
  kubeconfig?: string;
  listen: { host: string; port: number };
  logLevel: string;
  syncFrequency: number;
  systemdScope: 'auto' | 'off';
}

async function run(flags: RunFlags): Promise<number> {
  const logger = createLogger(flags.logLevel);
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      `podvol: must run as root to mount volumes (mount(2) needs CAP_SYS_ADMIN; this is uid ${process.getuid?.()}); try: sudo npm start\n`,
    );
    return 1;
  }
  if (
    !flags.podManifestPath &&
    !flags.kubeconfig &&
    !process.env.KUBECONFIG &&
    !process.env.KUBERNETES_SERVICE_HOST
  ) {
    process.stderr.write('podvol: nothing to serve: give --pod-manifest-path and/or --kubeconfig\n');
    return 2;
  }
  const cluster =
    flags.kubeconfig || process.env.KUBECONFIG || process.env.KUBERNETES_SERVICE_HOST
      ? await (await import('./agent/cluster.ts')).connectCluster({
          kubeconfig: flags.kubeconfig,
          nodeName: flags.nodeName,
          logger,
        })
      : undefined;
  const daemon = await startDaemon({
    rootDir: flags.rootDir,
    nodeName: flags.nodeName,
    podManifestPath: flags.podManifestPath,
    listen: flags.listen,
    syncFrequencyMs: flags.syncFrequency * 1000,
    systemdScope: flags.systemdScope,
    logger,
    version,
    cluster,
  });
  process.on('uncaughtException', (err) =>
    logger.error({ err: err.message, stack: err.stack }, 'uncaught exception'),
  );
  process.on('unhandledRejection', (err) => logger.error({ err: String(err) }, 'unhandled rejection'));
  const signal = await new Promise<string>((res) => {
    process.once('SIGTERM', () => res('SIGTERM'));
    process.once('SIGINT', () => res('SIGINT'));
  });
  logger.info({ signal }, 'stopping; mounted volumes stay mounted');
  await daemon.stop();
  logger.flush();
  return 0;
}

export function buildProgram(onRun: (flags: RunFlags) => Promise<number>): Command {
  const program = new Command('podvol')
    .description("Sets up and tears down pod volumes on this node, as kubelet's volume manager does")
    .version(version, '-v, --version')
    .exitOverride()
    .showHelpAfterError('(run podvol --help for usage)');
  program
    .command('run')
    .description('run the node agent')
    .addOption(rootDirOption())
    .addOption(nodeNameOption())
    .addOption(
      new Option(
        '--pod-manifest-path <dir>',
        'directory of static pod manifests (YAML or JSON), watched',
      ).env('PODVOL_POD_MANIFEST_PATH'),
    )
    .addOption(
      new Option('--kubeconfig <file>', 'kubeconfig for cluster mode (else KUBECONFIG, else in-cluster)'),
    )
    .addOption(
      new Option('--listen <host:port>', 'address for /metrics, /healthz, /readyz, /status')
        .env('PODVOL_LISTEN')
        .default(parseListen('127.0.0.1:10280'), '127.0.0.1:10280')
        .argParser(asListen),
    )
    .addOption(
      new Option(
        '--systemd-scope <mode>',
        'wrap mounts in systemd-run --scope when systemd runs the host (auto) or never (off)',
      )
        .env('PODVOL_SYSTEMD_SCOPE')
        .choices(['auto', 'off'])
        .default('auto'),
    )
    .addOption(
      new Option(
        '--sync-frequency <seconds>',
        'how often configMap, secret, token and downwardAPI files are re-rendered',
      )
        .env('PODVOL_SYNC_FREQUENCY')
        .default(60)
        .argParser(positiveSeconds),
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .env('PODVOL_LOG_LEVEL')
        .choices(logLevels)
        .default('info'),
    )
    .action(async (flags: RunFlags, cmd: Command) => {
      cmd.parent?.setOptionValue('exitCode', await onRun(flags));
    });
  program
    .command('version')
    .description('print the version')
    .action(() => {
      process.stdout.write(`podvol ${version} (node ${process.version})\n`);
    });
  registerOperatorCommands(program);
  return program;
}

/** Returns the process exit code. */
export async function main(argv: string[], onRun = run): Promise<number> {
  const program = buildProgram(onRun);
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
