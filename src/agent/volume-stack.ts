// The mount layer, volume plugins (CSI included) and volume host, put together
// the same way for everything that sets up or tears down volumes: the daemon
// (`podvol run`) and `podvol drain`. CSI drivers are found through
// <root>/plugins_registry by the plugin watcher (started by the caller), so a
// drain unpublishes and unstages CSI volumes through their drivers exactly as
// the daemon would.
import { resolve } from 'node:path';
import type { Logger } from '../logger.ts';
import { StatProbe, type WhileWaiting } from '../mount/deadline-stat.ts';
import { createRunner } from '../mount/exec.ts';
import { createLinuxMounter } from '../mount/linux.ts';
import type * as mount from '../mount/types.ts';
import { csiPlugin } from '../plugins/csi/csi-plugin.ts';
import { DriversStore } from '../plugins/csi/drivers.ts';
import { lazyCSIProto } from '../plugins/csi/grpc-status.ts';
import { csiRegistrationHandler, type NodeInfoManager, noNodeInfo } from '../plugins/csi/registration.ts';
import { probeVolumePlugins } from '../plugins/index.ts';
import { type ClusterBackend, createVolumeHost } from '../volumehost/host.ts';
import { VolumePluginMgr } from '../volumehost/plugin-manager.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { PluginWatcher } from './plugin-watcher.ts';

type CSIOptions = Parameters<typeof csiPlugin>[0];

export interface VolumeStackOptions {
  rootDir: string;
  nodeName: string;
  logger: Logger;
  systemdScope?: 'auto' | 'off';
  /** The API-backed half of the volume host (cluster mode). */
  cluster?: ClusterBackend;
  mounter?: mount.Interface;
  /** Where the host's / is (--host-root): hostPath volumes resolve under it. */
  hostRoot?: string;
  /** CSI: what node.status.volumesInUse holds (attach); empty where nothing is reported. */
  volumesReportedInUse?: CSIOptions['volumesReportedInUse'];
  /** CSI: per-call observation (metrics). */
  observeCSI?: CSIOptions['observe'];
  /** CSI: how long a volume waits for its VolumeAttachment before the wait fails with an Event (kubelet: 10 minutes). */
  waitForAttachTimeoutMs?: number;
  /** CSI: the CSINode/annotation manager a driver's registration updates; none without a cluster. */
  csiNodeInfo?: NodeInfoManager;
  /** How an operation waits on a filesystem that may not answer: the volume manager's executor's whileWaiting. */
  whileWaiting?: WhileWaiting;
}

export interface VolumeStack {
  mounter: mount.Interface;
  pluginMgr: VolumePluginMgr;
  host: VolumeHost;
  drivers: DriversStore;
  csi: ReturnType<typeof csiPlugin>;
  /** kubelet's plugin manager for CSI registration; not started. */
  pluginWatcher: PluginWatcher;
}

export function createVolumeStack(o: VolumeStackOptions): VolumeStack {
  const log = o.logger;
  // One runner starts every mount, umount and stat process: posix_spawn through native/spawn (see createRunner).
  const runner = createRunner();
  const mounter = o.mounter ?? createLinuxMounter({ logger: log, systemd: o.systemdScope ?? 'auto', runner });
  const pluginMgr = new VolumePluginMgr();
  const host = createVolumeHost({
    rootDir: o.rootDir,
    nodeName: o.nodeName,
    hostRoot: o.hostRoot,
    mounter,
    statProbe: new StatProbe({ runner, whileWaiting: o.whileWaiting }),
    pluginMgr,
    cluster: o.cluster,
    logger: log,
    onAgentError: (err) => err && log.error({ err: err.message }, 'volume host error'),
  });
  const drivers = new DriversStore();
  // Loaded when a driver registers or a CSI volume is set up, once for both.
  const csiProto = lazyCSIProto();
  const csi = csiPlugin({
    drivers,
    proto: csiProto,
    volumesReportedInUse: o.volumesReportedInUse ?? (() => new Set()),
    observe: o.observeCSI,
    waitForAttachTimeoutMs: o.waitForAttachTimeoutMs,
  });
  pluginMgr.initPlugins([...probeVolumePlugins(), csi], host);
  // kubelet's plugin manager: CSI drivers register through <root>/plugins_registry.
  const pluginWatcher = new PluginWatcher({
    dir: resolve(o.rootDir, 'plugins_registry'),
    logger: log,
    handlers: {
      CSIPlugin: csiRegistrationHandler({
        drivers,
        proto: csiProto,
        logger: log,
        nodeInfo: o.csiNodeInfo ?? noNodeInfo,
      }),
    },
  });
  return { mounter, pluginMgr, host, drivers, csi, pluginWatcher };
}
