// The VolumeHost the agent hands to plugins. In standalone mode (no cluster)
// the API-backed functions fail with kubelet's standalone error; in cluster
// mode a ClusterBackend supplies them.
import { statfsSync } from 'node:fs';
import { availableParallelism, networkInterfaces, totalmem } from 'node:os';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { type Logger, silentLogger } from '../logger.ts';
import { StatProbe } from '../mount/deadline-stat.ts';
import type * as mount from '../mount/types.ts';
import { ApiError } from './errors.ts';
import { type FsOps, nodeFsOps } from './fs.ts';
import { DEFAULT_HOST_ROOT } from './hostroot.ts';
import { createStandaloneTokenManager, createStandaloneTrustBundleManager } from './kube/standalone.ts';
import * as paths from './paths.ts';
import type { VolumePluginMgr } from './plugin-manager.ts';
import { createSafeFs } from './safe-fs.ts';
import type { CSIDriverLister, EventRecorder, VolumeHost } from './types.ts';
import type { Spec } from './volume.ts';

export const standaloneError = 'not supported due to running podvol in standalone mode';

/** What cluster mode adds; every member is optional so tests can supply only what they need. */
export interface ClusterBackend {
  kubeConfig?: KubeConfig;
  getSecret?: ReturnType<VolumeHost['getSecretFunc']>;
  getConfigMap?: ReturnType<VolumeHost['getConfigMapFunc']>;
  getServiceAccountToken?: ReturnType<VolumeHost['getServiceAccountTokenFunc']>;
  deleteServiceAccountToken?: (podUID: string) => void;
  getTrustAnchorsByName?: VolumeHost['getTrustAnchorsByName'];
  getTrustAnchorsBySigner?: VolumeHost['getTrustAnchorsBySigner'];
  eventRecorder?: EventRecorder;
  csiDrivers?: CSIDriverLister & {
    hasSynced(): boolean;
    waitForCacheSync(timeoutMs?: number): Promise<void>;
  };
  node?: () =>
    | { labels: Record<string, string>; allocatable: Record<string, string>; hostIP?: string }
    | undefined;
}

export interface VolumeHostOptions {
  rootDir: string;
  nodeName: string;
  /** --host-root: where the host's / is mounted (default '/'). */
  hostRoot?: string;
  mounter: mount.Interface;
  /** The filesystem plugins work on (default: the host's). */
  fs?: FsOps;
  pluginMgr: VolumePluginMgr;
  /** Default: a probe of its own (its processes start through the mount layer's runner, createRunner). */
  statProbe?: StatProbe;
  cluster?: ClusterBackend;
  logger?: Logger;
  /** Called when the host reports a problem that is not tied to one volume. */
  onAgentError?: (err: Error | undefined) => void;
}

/** kubelet's default hard eviction thresholds, which its standalone node subtracts from capacity. */
const evictionMemoryBytes = 100n * 1024n * 1024n;
const evictionNodefsFraction = 0.1;

/**
 * The allocatable of kubelet's standalone node object: machine capacity minus
 * the default hard eviction thresholds (memory.available<100Mi,
 * nodefs.available<10%), with no kube/system reservation configured.
 */
export function machineAllocatable(rootDir: string): Record<string, string> {
  const memory = BigInt(totalmem()) - evictionMemoryBytes;
  const out: Record<string, string> = {
    cpu: String(availableParallelism()),
    memory: String(memory),
    pods: '110',
  };
  try {
    const fs = statfsSync(rootDir, { bigint: true });
    const capacity = fs.blocks * fs.bsize;
    out['ephemeral-storage'] = String(
      capacity - BigInt(Math.floor(Number(capacity) * evictionNodefsFraction)),
    );
  } catch {
    // No root directory yet: ephemeral-storage stays unknown, as on a node without it.
  }
  return out;
}

/**
 * A standalone node's IP as kubelet picks one without --node-ip: the address
 * of an interface that is up and not loopback, IPv4 first.
 */
export function standaloneHostIP(): string | undefined {
  const addrs = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((a) => !a.internal);
  const v4 = addrs.find((a) => a.family === 'IPv4');
  return (v4 ?? addrs.find((a) => a.family === 'IPv6' && !a.address.startsWith('fe80')))?.address;
}

// kubelet's GetSecretFunc/GetConfigMapFunc without a manager.
const fail = (): Promise<never> => Promise.reject(new ApiError('StandaloneMode', standaloneError));

export function createVolumeHost(opts: VolumeHostOptions): VolumeHost {
  const { rootDir, cluster = {} } = opts;
  const statProbe = opts.statProbe ?? new StatProbe();
  const fs = createSafeFs(opts.fs ?? nodeFsOps());
  const logger = opts.logger ?? silentLogger();
  // Without an API server the Events go to the log, at debug as kubelet logs Events (-v=3): what
  // they say is already a log line of its own (op.failed's, the size limit's), or is given one
  // where it is emitted (host.getLogger()). At warn every failed SetUp was logged twice.
  const logRecorder: EventRecorder = {
    eventf(pod: V1Pod, type, reason, message) {
      logger.debug(
        { event: { type, reason }, pod: `${pod.metadata?.namespace}/${pod.metadata?.name}` },
        message,
      );
    },
  };
  let standaloneAllocatable: Record<string, string> | undefined;
  const standaloneTokens = createStandaloneTokenManager();
  const standaloneBundles = createStandaloneTrustBundleManager();
  const renamed = (volumeName: string, spec: Spec): Spec =>
    spec.volume ? { ...spec, volume: { ...spec.volume, name: `wrapped_${volumeName}` } } : spec;

  const host: VolumeHost = {
    getPluginDir: (p) => paths.pluginDir(rootDir, p),
    getPodsDir: () => paths.podsDir(rootDir),
    getPodVolumeDir: (uid, plugin, vol) => paths.podVolumeDir(rootDir, uid, plugin, vol),
    getPodPluginDir: (uid, plugin) => paths.podPluginDir(rootDir, uid, plugin),
    getKubeConfig: () => cluster.kubeConfig,
    getMounter: () => opts.mounter,
    getFs: () => fs,
    getStatProbe: () => statProbe,
    getHostRoot: () => opts.hostRoot ?? DEFAULT_HOST_ROOT,
    getHostIP: () => (cluster.node ? cluster.node()?.hostIP : standaloneHostIP()),
    getNodeName: () => opts.nodeName,
    getNodeAllocatable: () => {
      const fromApi = cluster.node?.()?.allocatable;
      if (fromApi && Object.keys(fromApi).length > 0) return fromApi;
      standaloneAllocatable ??= machineAllocatable(rootDir);
      return standaloneAllocatable;
    },
    getNodeLabels: () => cluster.node?.()?.labels ?? { 'kubernetes.io/hostname': opts.nodeName },
    getSecretFunc: () => cluster.getSecret ?? fail,
    getConfigMapFunc: () => cluster.getConfigMap ?? fail,
    // kubelet always asks its token and trust bundle managers; without an API server
    // those are the standalone managers, with their own wording.
    getServiceAccountTokenFunc: () =>
      cluster.getServiceAccountToken ?? standaloneTokens.getServiceAccountToken.bind(standaloneTokens),
    deleteServiceAccountTokenFunc: () => cluster.deleteServiceAccountToken ?? (() => {}),
    getTrustAnchorsByName: (name, allowMissing) =>
      (cluster.getTrustAnchorsByName ?? standaloneBundles.getTrustAnchorsByName)(name, allowMissing),
    getTrustAnchorsBySigner: (signer, selector, allowMissing) =>
      (cluster.getTrustAnchorsBySigner ?? standaloneBundles.getTrustAnchorsBySigner)(
        signer,
        selector,
        allowMissing,
      ),
    getEventRecorder: () => cluster.eventRecorder ?? logRecorder,
    getLogger: () => logger,
    csiDriverLister: () => cluster.csiDrivers,
    csiDriversSynced: () => cluster.csiDrivers?.hasSynced() ?? false,
    waitForCacheSync: async (timeoutMs) => {
      if (!cluster.csiDrivers) throw new Error('csiDriversSynced not found on VolumeHost');
      await cluster.csiDrivers.waitForCacheSync(timeoutMs);
    },
    setAgentError: (err) => opts.onAgentError?.(err),
    newWrapperMounter: (volumeName, spec, pod) => {
      const wrapped = renamed(volumeName, spec);
      return opts.pluginMgr.findPluginBySpec(wrapped).newMounter(wrapped, pod);
    },
    newWrapperUnmounter: (volumeName, spec, podUID) => {
      const wrapped = renamed(volumeName, spec);
      return opts.pluginMgr
        .findPluginBySpec(wrapped)
        .newUnmounter(wrapped.volume?.name ?? volumeName, podUID);
    },
    findPluginBySpec: (spec) => opts.pluginMgr.findPluginBySpec(spec),
  };
  return host;
}
