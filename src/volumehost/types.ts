// kubelet's VolumeHost (pkg/volume/plugins.go) plus KubeletVolumeHost extras:
// everything a plugin may ask of the node agent. Plugins see only this
// interface; the agent builds one per process (standalone or cluster-backed).
import type {
  AuthenticationV1TokenRequest,
  KubeConfig,
  V1ConfigMap,
  V1CSIDriver,
  V1LabelSelector,
  V1Pod,
  V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import type { StatProbe } from '../mount/deadline-stat.ts';
import type * as mount from '../mount/types.ts';
import type { SafeFs } from './safe-fs.ts';
import type { Mounter, Spec, Unmounter, VolumePlugin } from './volume.ts';

export type EventType = 'Normal' | 'Warning';

/** client-go's record.EventRecorder, narrowed to pods: the one way anything emits an Event. */
export interface EventRecorder {
  eventf(pod: V1Pod, type: EventType, reason: string, message: string): void;
}

export interface CSIDriverLister {
  get(name: string): V1CSIDriver | undefined;
  list(): V1CSIDriver[];
}

/** kubelet's ClusterTrustBundle lookups: the PEM text of the trust anchors, for projected clusterTrustBundle sources. */
export interface TrustAnchorSource {
  getTrustAnchorsByName(name: string, allowMissing: boolean): Promise<string>;
  getTrustAnchorsBySigner(
    signerName: string,
    labelSelector: V1LabelSelector | undefined,
    allowMissing: boolean,
  ): Promise<string>;
}

export interface VolumeHost extends TrustAnchorSource {
  // Directories, laid out exactly as kubelet's.
  getPluginDir(pluginName: string): string;
  getPodsDir(): string;
  getPodVolumeDir(podUID: string, escapedPluginName: string, volumeName: string): string;
  getPodPluginDir(podUID: string, escapedPluginName: string): string;

  getKubeConfig(): KubeConfig | undefined;
  getMounter(): mount.Interface;
  /** The filesystem plugins create, change and remove things on (`podvol plan` hands them a recording one). */
  getFs(): SafeFs;
  /** stat with a deadline in a child process, one per path at a time, for filesystems that may hang (deadline-stat.ts). */
  getStatProbe(): StatProbe;
  /** Where the host's / is (--host-root; '/' unless podvol runs in a container): hostPaths are resolved under it. */
  getHostRoot?(): string;
  getHostIP(): string | undefined;
  getNodeName(): string;
  getNodeAllocatable(): Record<string, string>;
  getNodeLabels(): Record<string, string>;

  getSecretFunc(): (namespace: string, name: string) => Promise<V1Secret>;
  getConfigMapFunc(): (namespace: string, name: string) => Promise<V1ConfigMap>;
  getServiceAccountTokenFunc(): (
    namespace: string,
    name: string,
    tr: AuthenticationV1TokenRequest,
  ) => Promise<AuthenticationV1TokenRequest>;
  deleteServiceAccountTokenFunc(): (podUID: string) => void;

  getEventRecorder(): EventRecorder;
  /**
   * The agent's logger, for what a plugin reports only by an Event: Events
   * themselves are logged at debug (kubelet logs them at -v=3), so such an
   * Event needs its own log line.
   */
  getLogger(): Logger;
  csiDriverLister(): CSIDriverLister | undefined;
  csiDriversSynced(): boolean;
  waitForCacheSync(timeoutMs?: number): Promise<void>;
  setAgentError(err: Error | undefined): void;

  /** Resolves a plugin for `spec` renamed to `wrapped_<volumeName>` (kubelet's wrapper volumes). */
  newWrapperMounter(volumeName: string, spec: Spec, pod: V1Pod): Mounter;
  newWrapperUnmounter(volumeName: string, spec: Spec, podUID: string): Unmounter;

  /** The plugin manager this host serves; wrapper resolution needs it. */
  findPluginBySpec(spec: Spec): VolumePlugin;
}
