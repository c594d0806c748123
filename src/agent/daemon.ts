// `podvol run`: wires the pod sources, volume host, plugins, volume manager,
// HTTP endpoints and signals together. Stopping unmounts nothing.

import type { Server } from 'node:http';
import { Server as HttpsServer } from 'node:https';
import { resolve } from 'node:path';
import { systemClock } from '../clock.ts';
import { errnoCode, errorMessage } from '../errno.ts';
import type { Logger } from '../logger.ts';
import type { WhileWaiting } from '../mount/deadline-stat.ts';
import type * as mount from '../mount/types.ts';
import { csiPluginName } from '../plugins/csi/csi-plugin.ts';
import { nodeFsOps } from '../volumehost/fs.ts';
import { createSafeFs } from '../volumehost/safe-fs.ts';
import { createSubPather } from '../volumehost/subpath.ts';
import { ACCESS_DEFAULTS, type AccessOptions, createSecureServing } from './access/serving.ts';
import type { Cluster } from './cluster.ts';
import { connectionCaps, LISTEN_BACKLOG, openFileLimit } from './connection-budget.ts';
import { GiveBack } from './give-back.ts';
import { createHttpServer, httpLimits } from './http.ts';
import { createMetrics, type VolumeStatsSample } from './metrics.ts';
import type { TeardownHoldStatus } from './ops/status.ts';
import { createPodManager } from './pod-manager.ts';
import { STATIC_POD_API_REFERENCE, staticPodAPIReference } from './pods/api-references.ts';
import { createStaticPodSource } from './pods/static-source.ts';
import type { PodSource } from './pods/types.ts';
import { referencedObjects } from './referenced-objects.ts';
import { claimRootDir } from './root-dir.ts';
import { loadPeerCred } from './runtime/peercred.ts';
import { type RuntimeServer, startRuntimeServer } from './runtime/server.ts';
import { runtimeStateOf } from './runtime/state.ts';
import { TerminationGate } from './runtime/termination.ts';
import { Opened, StartFailed } from './start-up.ts';
import { createVolumeStack } from './volume-stack.ts';
import { claimNameOf } from './volumemanager/claims.ts';
import { VOLUME_STATS_PERIOD_MS } from './volumemanager/context.ts';
import { VolumeManager } from './volumemanager/volume-manager.ts';
import type { VolumesInUseReporter } from './volumes-in-use.ts';

export interface RunOptions {
  rootDir: string;
  nodeName: string;
  podManifestPath?: string;
  listen: { host: string; port: number };
  /** The operation pool size (volume-manager default when unset). */
  maxConcurrentOperations?: number;
  /** Take over a root directory without podvol's mark, or marked for another node name (root-dir.ts). */
  adoptRootDir?: boolean;
  /** How long a first sync that looks like a configuration mistake is held (settle-guard.ts). */
  teardownSettlePeriodMs?: number;
  /** CSI: kubelet's waitForAttachTimeout (10 minutes when unset). */
  waitForAttachTimeoutMs?: number;
  /** kubelet's --sync-frequency: how often remount-requiring volumes are re-rendered. */
  syncFrequencyMs?: number;
  /** kubelet's --volume-stats-agg-period: how often emptyDir usage and CSI claims' volume stats are measured; 0 disables it. */
  volumeStatsAggPeriodMs?: number;
  /** mount-utils' systemd-run --scope wrapping: 'auto' probes for systemd, 'off' never wraps. */
  systemdScope?: 'auto' | 'off';
  /** TLS, authentication and authorization of a non-loopback listener (kubelet's flags). */
  access?: AccessOptions;
  logger: Logger;
  version: string;
  /** Cluster mode: the API pod source and the API-backed half of the volume host. */
  cluster?: Cluster;
  mounter?: mount.Interface;
  /** --host-root: where the host's / is mounted when podvol runs in a container. */
  hostRoot?: string;
  /** The runtime API's unix socket (undefined: not served), and the group allowed besides root. */
  runtimeSocket?: { path: string; group?: number };
  /** Aborted by a stop signal: a start still running closes what it opened and rejects with the reason. */
  signal?: AbortSignal;
}

export interface Daemon {
  volumeManager: VolumeManager;
  server: Server;
  runtime?: RuntimeServer;
  /** Stops loops and listeners; waits for running operations; unmounts nothing. */
  stop(): Promise<void>;
}

/**
 * Starts podvol. A start that fails, or is stopped by `o.signal`, closes
 * everything it had opened (the cluster's watches included: the daemon owns
 * them) before it rejects with StartFailed.
 */
export async function startDaemon(o: RunOptions): Promise<Daemon> {
  const opened = new Opened(o.logger, o.signal);
  opened.add('cluster connection', () => o.cluster?.stop());
  try {
    return await start(o, opened);
  } catch (err) {
    throw new StartFailed(err, await opened.closeAll());
  }
}

async function start(o: RunOptions, opened: Opened): Promise<Daemon> {
  const log = o.logger;
  const requestedRootDir = resolve(o.rootDir);
  // Before anything can reconstruct or tear down: is this root directory ours, for this node name?
  // (The CLI checks it before connecting to the API server; this keeps every caller safe.)
  await opened.step(
    claimRootDir(requestedRootDir, o.nodeName, o.adoptRootDir ?? false, log, createSafeFs(nodeFsOps())),
  );
  // Symlinks in the root directory's own path (/var/lib/podvol -> /data/podvol) are followed
  // here, once: below it, the mounter refuses any (src/mount/target.ts).
  const rootDir = await nodeFsOps().realpath(requestedRootDir);
  if (rootDir !== requestedRootDir)
    log.info({ rootDir, requested: requestedRootDir }, 'root directory resolved');
  let inUse: VolumesInUseReporter | undefined;
  // The CSI plugin reports to the metrics created below (they need the volume manager, which needs the plugins).
  let observeCSI: (driver: string, method: string, code: string, seconds: number) => void = () => {};
  // How an operation waits on a filesystem that may not answer: without its pool slot, once the
  // volume manager (whose pool it is) exists.
  let whileWaiting: WhileWaiting = (wait) => wait();
  const { mounter, pluginMgr, host, drivers, csi, pluginWatcher } = createVolumeStack({
    rootDir,
    nodeName: o.nodeName,
    logger: log,
    systemdScope: o.systemdScope,
    cluster: o.cluster?.backend,
    mounter: o.mounter,
    volumesReportedInUse: () => inUse?.reported() ?? new Set(),
    observeCSI: (driver, method, code, seconds) => observeCSI(driver, method, code, seconds),
    csiNodeInfo: o.cluster?.csiNodeInfo,
    hostRoot: o.hostRoot,
    waitForAttachTimeoutMs: o.waitForAttachTimeoutMs,
    whileWaiting: (wait) => whileWaiting(wait),
  });
  const sources: PodSource[] = [...(o.cluster?.sources ?? [])];
  if (o.podManifestPath) {
    sources.push(
      createStaticPodSource({
        dir: resolve(o.podManifestPath),
        nodeName: o.nodeName,
        logger: log,
        // In cluster mode a static pod may not name API objects, as the API server refuses such mirror pods.
        refuse: o.cluster
          ? (pod) => {
              const message = staticPodAPIReference(pod, o.nodeName);
              return message ? { reason: STATIC_POD_API_REFERENCE, message } : undefined;
            }
          : undefined,
      }),
    );
  }
  const podManager = createPodManager(sources);
  // Loaded before anything can be torn down: which pods a runtime may still be using.
  const gate = new TerminationGate({ rootDir, logger: log });
  await opened.step(gate.load());
  opened.add('termination records', () => gate.flush());
  // Checked before anything starts, so a podvol that cannot check its callers never serves them.
  const peerCred = o.runtimeSocket ? loadPeerCred() : undefined;
  const subPaths = createSubPather({ rootDir, mounter, fs: host.getFs(), logger: log });

  let vm: VolumeManager;
  const podInUse = (uid: string) => vm.podHasVolumes(uid);
  // kubelet_volume_stats_*: refreshed in the background every volume stats period (kubelet's
  // --volume-stats-agg-period, as its volume stats calculator), served from this cache.
  let volumeStats: VolumeStatsSample[] = [];
  let statsRunning = false;
  const refreshVolumeStats = async () => {
    if (statsRunning) return;
    statsRunning = true;
    const next: typeof volumeStats = [];
    try {
      for (const v of vm.asw.all()) {
        // A generic ephemeral volume's claim (<pod>-<volume>) too, as kubelet labels it.
        const claim = v.spec.volume && claimNameOf({ metadata: { name: v.podName } }, v.spec.volume);
        if (v.pluginName !== csiPluginName || v.state !== 'mounted' || !claim) continue;
        const s = await csi.volumeStats(v.podUID, v.innerName).catch(() => undefined);
        if (s) next.push({ namespace: v.podNamespace, persistentvolumeclaim: claim, ...s });
      }
      volumeStats = next;
    } finally {
      statsRunning = false;
    }
  };
  const metrics = createMetrics({
    version: o.version,
    volumeStats: () => volumeStats,
    emptyDirs: () => vm.stats.samples(),
    volumeCounts: () => {
      const counts = new Map<string, { plugin: string; desired: number; actual: number }>();
      const get = (plugin: string) => {
        const c = counts.get(plugin) ?? { plugin, desired: 0, actual: 0 };
        counts.set(plugin, c);
        return c;
      };
      for (const d of vm.dsw.volumesToMount()) get(d.pluginName ?? '').desired++;
      for (const a of vm.asw.all()) if (a.state === 'mounted') get(a.pluginName).actual++;
      return [...counts.values()];
    },
    volumeStates: () => {
      const counts = new Map<string, { plugin: string; state: string; count: number }>();
      for (const p of vm.status()) {
        for (const v of p.volumes) {
          const k = `${v.plugin}\0${v.state}`;
          const c = counts.get(k) ?? { plugin: v.plugin, state: v.state, count: 0 };
          c.count++;
          counts.set(k, c);
        }
      }
      return [...counts.values()];
    },
    podSources: () =>
      sources.map((s) => ({ source: s.name, pods: s.pods().length, synced: s.hasSynced(), ...s.stats() })),
  });
  observeCSI = (driver, method, code, seconds) => metrics.csiOperation(driver, method, code, seconds);
  vm = new VolumeManager({
    rootDir,
    host,
    pluginMgr,
    mounter,
    logger: log,
    pods: () => {
      const all = podManager.pods();
      // Registered with the object caches from the very list the desired state is built from: a
      // volume's first SetUp finds its secret or configMap registered and waits for its first list.
      // A pod that went keeps its objects until its volumes are torn down (released by housekeeping
      // below): a remount SetUp still running for it must not fail 'object not registered'.
      o.cluster?.podsChanged(all, podInUse);
      return gate.filter(all, podManager.allSourcesReady());
    },
    sourcesReady: () => podManager.allSourcesReady(),
    heldPod: (uid) => gate.held(uid),
    cleanSubPaths: (uid, volume, fs) => subPaths.cleanSubPaths(uid, volume, fs),
    metrics,
    resyncPeriodMs: o.syncFrequencyMs,
    volumeStatsPeriodMs: o.volumeStatsAggPeriodMs,
    settlePeriodMs: o.teardownSettlePeriodMs,
    maxConcurrentOperations: o.maxConcurrentOperations,
    claims: o.cluster?.claims,
    phaseOf: (uid, inner, plugin) => (plugin === csiPluginName ? csi.phaseOf(uid, inner) : undefined),
    housekeeping: async () => {
      // Runs after teardowns: the objects of pods whose last volume just went are released.
      o.cluster?.podsChanged(podManager.pods(), podInUse);
    },
  });
  whileWaiting = (wait) => vm.executor.whileWaiting(wait);
  // After a big teardown, the heap V8 grew for the pods is given back once the daemon is quiet (give-back.ts).
  const giveBack = new GiveBack({
    clock: systemClock(),
    logger: log,
    volumes: () => vm.asw.size,
    busy: () => vm.executor.pendingCount() > 0,
  });
  const stopGiveBack = vm.subscribe(() => giveBack.changed());
  opened.add('memory give-back', () => {
    stopGiveBack();
    giveBack.stop();
  });
  if (o.cluster) {
    // Imported here: it needs the Kubernetes client, which standalone mode never loads.
    const { VolumesInUseReporter } = await import('./volumes-in-use.ts');
    inUse = new VolumesInUseReporter({
      kubeConfig: o.cluster.kubeConfig,
      nodeName: o.nodeName,
      logger: log,
      inUse: async () => {
        const names: string[] = [];
        const add = (spec: Parameters<typeof csi.attachableVolumeName>[0] | undefined) => {
          const n = spec && csi.attachableVolumeName(spec);
          if (n) names.push(n);
        };
        for (const d of vm.dsw.volumesToMount()) add(d.spec);
        for (const v of vm.asw.all()) add(v.spec);
        // A device stays in use until it is unstaged, after its pods' volumes are gone
        // (kubelet's actual state keeps it until UnmountDevice succeeds; reconstruction finds it after a restart).
        for (const d of vm.asw.devices()) add(d.spec);
        return names;
      },
    });
  }
  // A driver that registers (again) is used at once by the volumes waiting for it.
  drivers.onChange(() => vm.retryPlugin(csiPluginName));
  o.cluster?.claims.onChange(() => vm.podsChanged());
  // The next pass (at once, see VolumeManager.kick) re-reads the pods, registering their objects first.
  for (const s of sources) s.onChange(() => vm.podsChanged());
  // A changed secret or configMap reaches the files of every volume that renders it on the next pass.
  o.cluster?.onObjectChange((kind, namespace, name) => {
    // A cluster trust bundle changed (from the watch, as kubelet's informer): re-render
    // every projected volume with a clusterTrustBundle source; unchanged files are not rewritten.
    if (kind === 'clustertrustbundle') {
      vm.markRemountRequired(
        (v) => v.spec.volume?.projected?.sources?.some((src) => src.clusterTrustBundle) ?? false,
      );
      return;
    }
    vm.markRemountRequired((v) => {
      if (v.podNamespace !== namespace || !v.spec.volume) return false;
      const refs = referencedObjects({
        metadata: { namespace },
        spec: { containers: [], volumes: [v.spec.volume] },
      });
      return (kind === 'secret' ? refs.secrets : refs.configMaps).has(`${namespace}/${name}`);
    });
  });

  const secure = await opened.step(
    createSecureServing({
      access: o.access ?? ACCESS_DEFAULTS,
      listenHost: o.listen.host,
      rootDir,
      nodeName: o.nodeName,
      kubeConfig: o.cluster?.kubeConfig,
      logger: log,
    }),
  );
  // Client connections get a bounded share of the descriptors; the rest is the mount work's.
  const caps = connectionCaps(openFileLimit());
  const server = createHttpServer(
    {
      registry: metrics.registry,
      alive: () => vm.isAlive(),
      ready: () => {
        const reasons: string[] = [];
        for (const s of sources) {
          if (!s.hasSynced()) reasons.push(`pod source ${s.name} has not synced`);
          // A source that synced once and then cannot read is not ready either: it no longer follows its input.
          const problem = s.problem?.();
          if (problem !== undefined) reasons.push(`pod source ${s.name}: ${problem}`);
        }
        reasons.push(...(o.cluster?.notReady() ?? []));
        if (!vm.isReady()) reasons.push('volume state not reconstructed and populated yet');
        return { ready: reasons.length === 0, reasons };
      },
      status: () => ({
        node: o.nodeName,
        pods: vm.status(),
        ...teardownHoldStatus(vm),
        errors: podManager.errors(),
      }),
    },
    secure,
    { ...httpLimits, ...caps.http },
    log,
  );
  const stopWatchingFiles = server instanceof HttpsServer ? secure?.watchFiles(server) : undefined;
  if (stopWatchingFiles) opened.add('certificate file watches', stopWatchingFiles);
  // The runtime socket is up before /healthz answers, so a runtime that waits for podvol finds it.
  const runtime =
    o.runtimeSocket && peerCred
      ? await opened.open(
          'runtime socket',
          startRuntimeServer({
            path: o.runtimeSocket.path,
            group: o.runtimeSocket.group,
            logger: log,
            peerCred,
            limits: caps.runtime,
            state: runtimeStateOf(vm, pluginMgr, gate),
            host,
            subPaths,
          }),
          (r) => r.close(),
        )
      : undefined;
  await opened.open('HTTP listener', listen(server, o.listen), () => closeServer(server));
  // Reconstruction happens before any source can make the reconciler unmount.
  // Stopped once its start is over: a stop during reconstruction would be undone by the loop it starts.
  const vmStarted = vm.start();
  opened.add('volume manager', () => vmStarted.then(() => vm.stop()));
  // Cancelled before the volume manager waits for its operations (closers run last first).
  opened.add('CSI calls', () => csi.cancelCalls());
  await opened.step(vmStarted);
  opened.add('plugin watcher', () => pluginWatcher.stop());
  await opened.step(pluginWatcher.start());
  if (inUse) opened.add('volumes-in-use reporter', () => inUse?.stop());
  inUse?.start();
  const statsPeriodMs = o.volumeStatsAggPeriodMs ?? VOLUME_STATS_PERIOD_MS;
  // 0 disables the measurement, as kubelet's --volume-stats-agg-period 0 (and emptyDir's in volume-stats.ts).
  const statsTimer =
    statsPeriodMs > 0
      ? systemClock().every(statsPeriodMs, () => void refreshVolumeStats(), { unref: true })
      : undefined;
  opened.add('volume stats timer', () => statsTimer?.cancel());
  for (const s of sources) {
    opened.add(`pod source ${s.name}`, () => s.stop());
    await opened.step(s.start());
  }
  vm.podsChanged();
  log.info(
    {
      // What to stop: npm start, a shell or the old-Node re-exec (bin/podvol.js) may stand in front of it.
      pid: process.pid,
      rootDir,
      node: o.nodeName,
      listen: `${o.listen.host}:${o.listen.port}`,
      sources: sources.map((s) => s.name),
      plugins: pluginMgr.names(),
    },
    'podvol started',
  );

  return {
    volumeManager: vm,
    server,
    runtime,
    async stop() {
      stopWatchingFiles?.();
      await runtime?.close();
      await gate.flush();
      await Promise.all(sources.map((s) => s.stop()));
      statsTimer?.cancel();
      await pluginWatcher.stop();
      await inUse?.stop();
      await o.cluster?.stop();
      // A CSI driver that never answers must not hold the exit for its 2-minute deadline.
      const cancelled = csi.cancelCalls();
      if (cancelled > 0) log.info({ calls: cancelled }, 'cancelled CSI calls in flight for shutdown');
      await vm.stop();
      stopGiveBack();
      giveBack.stop();
      await closeServer(server);
    },
  };
}

/** Listens on --listen; an address in use is said in one line an operator can act on. */
function listen(server: Server, at: { host: string; port: number }): Promise<void> {
  return new Promise<void>((res, rej) => {
    const failed = (err: Error) => {
      const where = `${at.host.includes(':') ? `[${at.host}]` : at.host}:${at.port}`;
      if (errnoCode(err) === 'EADDRINUSE')
        rej(new Error(`cannot listen on ${where}: address already in use (another podvol? see --listen)`));
      else rej(new Error(`cannot listen on ${where}: ${errorMessage(err)}`));
    };
    server.once('error', failed);
    server.listen({ port: at.port, host: at.host, backlog: LISTEN_BACKLOG }, () => {
      server.off('error', failed);
      res();
    });
  });
}

async function closeServer(server: Server): Promise<void> {
  await new Promise<void>((res) => server.close(() => res()));
  server.closeAllConnections();
}

/** /status's teardownHold: present only while the settle guard holds a first-sync teardown. */
function teardownHoldStatus(vm: VolumeManager): { teardownHold?: TeardownHoldStatus } {
  const h = vm.teardownHold();
  if (!h) return {};
  return {
    teardownHold: {
      since: new Date(h.since).toISOString(),
      until: new Date(h.until).toISOString(),
      volumes: h.toTearDown,
      adopted: h.adopted,
      message: `the first sync would tear down ${h.toTearDown} of ${h.adopted} volumes adopted at start; held until ${new Date(h.until).toISOString()}, then checked again`,
    },
  };
}
