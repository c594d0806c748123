// `podvol run`: the node agent. New run flags go next to the existing ones in
// runCommand(); the daemon itself is wired in src/agent/daemon.ts.
import { resolve } from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { resolveAccess } from '../agent/access/serving.ts';
import type { Daemon } from '../agent/daemon.ts';
import { parseListen } from '../agent/http.ts';
import { createLogger, type LogFormat } from '../agent/logger.ts';
import { claimRootDir, RootDirError } from '../agent/root-dir.ts';
import { lockRootDir, RootDirLockedError } from '../agent/root-lock.ts';
import { resolveGroup } from '../agent/runtime/group.ts';
import { StartAborted, StartFailed } from '../agent/start-up.ts';
import {
  SYNC_FREQUENCY_MS,
  TEARDOWN_SETTLE_PERIOD_MS,
  VOLUME_STATS_PERIOD_MS,
} from '../agent/volumemanager/context.ts';
import { errorMessage } from '../errno.ts';
import { WAIT_FOR_ATTACH_TIMEOUT_MS } from '../plugins/csi/timeouts.ts';
import { version } from '../version.ts';
import { mkdirAllTrusted, nodeFsOps } from '../volumehost/fs.ts';
import { DEFAULT_HOST_ROOT } from '../volumehost/hostroot.ts';
import { createSafeFs } from '../volumehost/safe-fs.ts';
import { type AccessFlags, accessOptions, toAccessOptions } from './access.ts';
import { EXIT_FAILURE, helpNotes, setExitCode, usageError } from './command.ts';
import { applyConfigFile, configOption } from './config-file.ts';
import { formatDuration } from './duration.ts';
import {
  absolutePath,
  addNodeNameOptions,
  argumentParser,
  durationArg,
  logFormatOption,
  logLevelOption,
  rootDirOption,
  runtimeSocketOption,
  systemdScopeOption,
} from './options.ts';

const asListen = argumentParser(parseListen);

const positiveInteger = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`must be a whole number of 1 or more, got "${v}"`);
  return n;
};

export interface RunFlags extends AccessFlags {
  rootDir: string;
  nodeName: string;
  podManifestPath?: string;
  kubeconfig?: string;
  listen: { host: string; port: number };
  logLevel: string;
  logFormat: LogFormat;
  /** Milliseconds. */
  syncFrequency: number;
  /** Milliseconds; 0 disables emptyDir usage measurement. */
  volumeStatsAggPeriod: number;
  systemdScope: 'auto' | 'off';
  runtimeSocket: string;
  runtimeSocketGroup?: number;
  hostRoot: string;
  teardownSettlePeriod: number;
  /** Milliseconds. */
  waitForAttachTimeout: number;
  maxConcurrentOperations?: number;
  adoptRootDir?: boolean;
}

const asGroup = argumentParser(resolveGroup);

const asSocketPath = (v: string) => {
  const path = absolutePath(v);
  // sun_path holds 107 bytes and a NUL: the path as resolved is what is bound.
  if (Buffer.byteLength(path) > 107)
    throw new InvalidArgumentError(`is longer than a unix socket path may be (107 bytes): ${path}`);
  return path;
};

export async function run(flags: RunFlags): Promise<number> {
  const logger = createLogger(flags.logLevel, { format: flags.logFormat });
  if (
    !flags.podManifestPath &&
    !flags.kubeconfig &&
    !process.env.KUBECONFIG &&
    !process.env.KUBERNETES_SERVICE_HOST
  ) {
    return usageError('nothing to serve: give --pod-manifest-path and/or --kubeconfig');
  }
  const clusterMode = Boolean(
    flags.kubeconfig || process.env.KUBECONFIG || process.env.KUBERNETES_SERVICE_HOST,
  );
  try {
    resolveAccess(toAccessOptions(flags), flags.listen.host, clusterMode);
  } catch (err) {
    return usageError(errorMessage(err));
  }
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      `podvol: must run as root to mount volumes (mount(2) needs CAP_SYS_ADMIN; this is uid ${process.getuid?.()}); try: sudo npm start\n`,
    );
    return 1;
  }
  // Listening before the daemon starts: a SIGTERM during start-up stops the start (what it had
  // opened is closed) instead of killing it half-way or waiting for it (a start can hang on a
  // dead filesystem). `on`, not `once`: execa's child clean-up (signal-exit) re-raises a signal
  // when no other listener is left, which killed podvol on a SIGTERM that came while a mount or
  // stat ran.
  const stopping = new AbortController();
  const stopSignal = new Promise<string>((res) => {
    stopping.signal.addEventListener('abort', () => res(signalOf(stopping.signal.reason)));
  });
  const onSignal = (signal: NodeJS.Signals) => {
    if (!stopping.signal.aborted) stopping.abort(new StartAborted(signal));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    return await runUntilStopped(flags, clusterMode, logger, stopping.signal, stopSignal);
  } finally {
    // Gone with the daemon: should anything still hold the process, a signal ends it as by default.
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

async function runUntilStopped(
  flags: RunFlags,
  clusterMode: boolean,
  logger: ReturnType<typeof createLogger>,
  signal: AbortSignal,
  stopSignal: Promise<string>,
): Promise<number> {
  // The lock comes before anything reads or changes the root directory (reconstruction included).
  const rootDir = resolve(flags.rootDir);
  await mkdirAllTrusted(nodeFsOps(), rootDir, 0o750);
  let lock: Awaited<ReturnType<typeof lockRootDir>>;
  try {
    lock = await lockRootDir(rootDir, 'run');
  } catch (err) {
    if (!(err instanceof RootDirLockedError)) throw err;
    process.stderr.write(`podvol: ${err.message}\n`);
    return EXIT_FAILURE;
  }
  let daemon: Daemon;
  try {
    await claimRootDir(
      rootDir,
      flags.nodeName,
      flags.adoptRootDir ?? false,
      logger,
      createSafeFs(nodeFsOps()),
    );
    const cluster = clusterMode
      ? await (await import('../agent/cluster.ts')).connectCluster({
          kubeconfig: flags.kubeconfig,
          nodeName: flags.nodeName,
          logger,
        })
      : undefined;
    // Loaded here, not at the top: `podvol version`, `status` and `--help` need none of it.
    const { startDaemon } = await import('../agent/daemon.ts');
    // It owns the cluster from here: a start that fails or is stopped closes it with the rest.
    daemon = await startDaemon({
      rootDir,
      adoptRootDir: flags.adoptRootDir ?? false,
      teardownSettlePeriodMs: flags.teardownSettlePeriod,
      waitForAttachTimeoutMs: flags.waitForAttachTimeout,
      maxConcurrentOperations: flags.maxConcurrentOperations,
      nodeName: flags.nodeName,
      podManifestPath: flags.podManifestPath,
      listen: flags.listen,
      syncFrequencyMs: flags.syncFrequency,
      volumeStatsAggPeriodMs: flags.volumeStatsAggPeriod,
      systemdScope: flags.systemdScope,
      access: toAccessOptions(flags),
      hostRoot: flags.hostRoot,
      runtimeSocket: flags.runtimeSocket
        ? { path: flags.runtimeSocket, group: flags.runtimeSocketGroup }
        : undefined,
      logger,
      version,
      cluster,
      signal,
    });
  } catch (err) {
    await lock.release();
    if (err instanceof RootDirError) {
      process.stderr.write(`podvol: ${err.message}\n`);
      return EXIT_FAILURE;
    }
    const cause = err instanceof StartFailed ? err.cause : err;
    const leftBehind = err instanceof StartFailed ? err.leftBehind : [];
    if (cause instanceof StartAborted) logger.info({ signal: cause.signal }, 'stopped during start-up');
    else process.stderr.write(`podvol: ${errorMessage(cause)}\n`);
    // Written out before the process ends by a kill or an exit, which do not wait for the log.
    await new Promise<void>((res) => logger.flush(() => res()));
    if (cause instanceof StartAborted && leftBehind.length > 0) {
      // A step stuck in the kernel (a stat on a dead filesystem) holds a thread of Node's pool,
      // and a normal exit waits for every thread: die of the signal instead, by its default action.
      process.removeAllListeners(cause.signal);
      process.kill(process.pid, cause.signal);
    }
    // Everything the start opened is closed; a step it left running (a start that went on after
    // the stop) must not keep a podvol that serves nothing alive.
    process.exit(cause instanceof StartAborted ? 0 : EXIT_FAILURE);
  }
  process.on('uncaughtException', (err) =>
    logger.error({ err: err.message, stack: err.stack }, 'uncaught exception'),
  );
  process.on('unhandledRejection', (err) => logger.error({ err: String(err) }, 'unhandled rejection'));
  logger.info({ signal: await stopSignal }, 'stopping; mounted volumes stay mounted');
  await daemon.stop();
  await lock.release();
  logger.flush();
  return 0;
}

const signalOf = (reason: unknown) => (reason instanceof StartAborted ? reason.signal : String(reason));

export function runCommand(program: Command): void {
  const cmd = program
    .command('run')
    .description('run the node agent')
    .addOption(configOption())
    // Registered first: the node-name hook of addNodeNameOptions must see a name from the file too.
    .hook('preAction', (c) => applyConfigFile(c, true))
    .addOption(rootDirOption());
  addNodeNameOptions(cmd)
    .addOption(
      new Option(
        '--pod-manifest-path <path>',
        'static pod manifests (YAML or JSON): a directory of them or one file; watched',
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
    .addOption(systemdScopeOption())
    .addOption(
      new Option(
        '--sync-frequency <duration>',
        'how often configMap, secret, token and downwardAPI files are re-rendered (e.g. 1m0s, 90s)',
      )
        .env('PODVOL_SYNC_FREQUENCY')
        .default(SYNC_FREQUENCY_MS, formatDuration(SYNC_FREQUENCY_MS))
        .argParser(durationArg('--sync-frequency')),
    )
    .addOption(
      new Option(
        '--volume-stats-agg-period <duration>',
        "how often emptyDir usage and CSI claims' volume stats are measured for /status and /metrics (kubelet's flag; 0s disables it)",
      )
        .env('PODVOL_VOLUME_STATS_AGG_PERIOD')
        .default(VOLUME_STATS_PERIOD_MS, formatDuration(VOLUME_STATS_PERIOD_MS))
        .argParser(durationArg('--volume-stats-agg-period', 0)),
    )
    .addOption(runtimeSocketOption("the runtime API's unix socket ('' disables it)").argParser(asSocketPath))
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
        .default(DEFAULT_HOST_ROOT)
        .argParser((v: string) => {
          if (!v.startsWith('/')) throw new InvalidArgumentError(`must be an absolute path, got "${v}"`);
          return v.length > 1 ? v.replace(/\/+$/, '') : v;
        }),
    )
    .addOption(
      new Option(
        '--teardown-settle-period <duration>',
        'how long a first sync that would tear down most volumes adopted at start while the pod sources deliver few pods is held before it is checked again (0s: no hold)',
      )
        .env('PODVOL_TEARDOWN_SETTLE_PERIOD')
        .default(TEARDOWN_SETTLE_PERIOD_MS, formatDuration(TEARDOWN_SETTLE_PERIOD_MS))
        .argParser(durationArg('--teardown-settle-period', 0)),
    )
    .addOption(
      new Option(
        '--wait-for-attach-timeout <duration>',
        "how long a CSI volume that needs attaching waits for its VolumeAttachment before the wait fails with an Event and starts again (kubelet's waitForAttachTimeout)",
      )
        .env('PODVOL_WAIT_FOR_ATTACH_TIMEOUT')
        .default(WAIT_FOR_ATTACH_TIMEOUT_MS, formatDuration(WAIT_FOR_ATTACH_TIMEOUT_MS))
        .argParser(durationArg('--wait-for-attach-timeout')),
    )
    .addOption(
      new Option(
        '--max-concurrent-operations <n>',
        'mount and unmount operations running at once (default: 8 per CPU, at least 16; a pod gets more than half only while no other pod waits)',
      )
        .env('PODVOL_MAX_CONCURRENT_OPERATIONS')
        .argParser(positiveInteger),
    )
    .addOption(
      new Option(
        '--adopt-root-dir',
        'take over a root directory podvol did not create (no mark), or marked for another node name',
      ).env('PODVOL_ADOPT_ROOT_DIR'),
    )
    .addOption(logLevelOption())
    .addOption(logFormatOption())
    .addHelpText(
      'after',
      helpNotes(
        "\nDurations take Go's syntax, as kubelet's flags: 90s, 1m0s, 1h30m, 500ms.\n--config FILE: a YAML mapping whose keys are these flags (rootDir or root-dir: ...); flags and PODVOL_* variables win.",
      ),
    )
    .action(async (flags: RunFlags, c: Command) => {
      setExitCode(c, await run(flags));
    });
  // Access to the HTTP port (TLS, webhook authn/authz): kubelet's flags, in src/cli/access.ts.
  for (const o of accessOptions()) cmd.addOption(o);
}
