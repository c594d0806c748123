// `podvol run`: the node agent. New run flags go next to the existing ones in
// runCommand(); the daemon itself is wired in src/agent/daemon.ts.
import { type Command, InvalidArgumentError, Option } from 'commander';
import { resolveAccess } from '../agent/access/serving.ts';
import { parseListen } from '../agent/http.ts';
import { createLogger, logLevels } from '../agent/logger.ts';
import { resolveGroup } from '../agent/runtime/group.ts';
import { version } from '../version.ts';
import { type AccessFlags, accessOptions, toAccessOptions } from './access.ts';
import { setExitCode, usageError } from './command.ts';
import { nodeNameOption, rootDirOption, runtimeSocketOption } from './options.ts';

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

export interface RunFlags extends AccessFlags {
  rootDir: string;
  nodeName: string;
  podManifestPath?: string;
  kubeconfig?: string;
  listen: { host: string; port: number };
  logLevel: string;
  syncFrequency: number;
  systemdScope: 'auto' | 'off';
  runtimeSocket: string;
  runtimeSocketGroup?: number;
  hostRoot: string;
}

const asGroup = (v: string) => {
  try {
    return resolveGroup(v);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};

const asSocketPath = (v: string) => {
  if (v !== '' && !v.startsWith('/')) throw new InvalidArgumentError(`must be an absolute path, got "${v}"`);
  // sun_path holds 107 bytes and a NUL.
  if (Buffer.byteLength(v) > 107)
    throw new InvalidArgumentError('is longer than a unix socket path may be (107 bytes)');
  return v;
};

export async function run(flags: RunFlags): Promise<number> {
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
  const clusterMode = Boolean(
    flags.kubeconfig || process.env.KUBECONFIG || process.env.KUBERNETES_SERVICE_HOST,
  );
  try {
    resolveAccess(toAccessOptions(flags), flags.listen.host, clusterMode);
  } catch (err) {
    return usageError((err as Error).message);
  }
  const cluster = clusterMode
    ? await (await import('../agent/cluster.ts')).connectCluster({
        kubeconfig: flags.kubeconfig,
        nodeName: flags.nodeName,
        logger,
      })
    : undefined;
  // Loaded here, not at the top: the other commands (mounts, wait, status) start without the daemon's modules.
  const { startDaemon } = await import('../agent/daemon.ts');
  const daemon = await startDaemon({
    rootDir: flags.rootDir,
    nodeName: flags.nodeName,
    podManifestPath: flags.podManifestPath,
    listen: flags.listen,
    syncFrequencyMs: flags.syncFrequency * 1000,
    systemdScope: flags.systemdScope,
    access: toAccessOptions(flags),
    logger,
    version,
    cluster,
    hostRoot: flags.hostRoot,
    runtimeSocket: flags.runtimeSocket
      ? { path: flags.runtimeSocket, group: flags.runtimeSocketGroup }
      : undefined,
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

export function runCommand(program: Command): void {
  const command = program
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
    .addOption(runtimeSocketOption().argParser(asSocketPath))
    .addOption(
      new Option(
        '--runtime-socket-group <group>',
        'a group (name or GID) whose members may use the runtime socket besides root',
      )
        .env('PODVOL_RUNTIME_SOCKET_GROUP')
        .argParser(asGroup),
    )
    .addOption(
      new Option(
        '--host-root <dir>',
        "where the host's / is (a container mounts it, e.g. /host): every hostPath is resolved under it",
      )
        .env('PODVOL_HOST_ROOT')
        .default('/')
        .argParser((v: string) => {
          if (!v.startsWith('/')) throw new InvalidArgumentError(`must be an absolute path, got "${v}"`);
          return v.length > 1 ? v.replace(/\/+$/, '') : v;
        }),
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .env('PODVOL_LOG_LEVEL')
        .choices(logLevels)
        .default('info'),
    );
  for (const o of accessOptions()) command.addOption(o);
  command.action(async (flags: RunFlags, cmd: Command) => {
    setExitCode(cmd, await run(flags));
  });
}
