// The CSI plugin in this process, with the real mounter, a volume host on a
// temp root and the test driver (real gRPC, real mounts) registered by hand:
// for plugin tests and bench/csi.bench.ts, which need the plugin's own
// behaviour without a daemon around it. Mounts: run inside a private mount
// namespace.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { V1CSIDriver, V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import type { Clock } from '../../src/clock.ts';
import { createLinuxMounter } from '../../src/mount/linux.ts';
import { type CSIPlugin, csiPlugin } from '../../src/plugins/csi/csi-plugin.ts';
import { DriversStore } from '../../src/plugins/csi/drivers.ts';
import { type ClusterBackend, createVolumeHost } from '../../src/volumehost/host.ts';
import { VolumePluginMgr } from '../../src/volumehost/plugin-manager.ts';
import type { Spec } from '../../src/volumehost/volume.ts';
import { type DriverConfig, startTestDriver, type TestDriver, writeDriverConfig } from './driver.ts';

export interface HarnessOptions {
  driverName?: string;
  driver?: Partial<DriverConfig>;
  /** The CSIDriver object's spec (default attachRequired: false). */
  csiDriver?: V1CSIDriver['spec'];
  /** Per-call deadline of the plugin (kubelet: 2 min). */
  timeoutMs?: number;
  cluster?: ClusterBackend;
  /** The plugin's host SELinux check (default: the real host's). */
  seLinuxEnabled?: () => boolean;
  /** The plugin's SELinuxMount feature gate (default off, as kubelet's). */
  seLinuxMountFeature?: boolean;
  /** The attach wait's clock and timeout, and what the node reported in use (default: nothing). */
  clock?: Clock;
  waitForAttachTimeoutMs?: number;
  volumesReportedInUse?: () => ReadonlySet<string>;
}

export interface Harness {
  root: string;
  stateDir: string;
  driverName: string;
  driver: TestDriver;
  drivers: DriversStore;
  /** A fresh plugin on the same root and driver: what a restarted podvol has. */
  newPlugin(o?: { timeoutMs?: number }): CSIPlugin;
  plugin: CSIPlugin;
  stop(): Promise<void>;
}

export async function startHarness(base: string, o: HarnessOptions = {}): Promise<Harness> {
  const driverName = o.driverName ?? 'harness.csi.podvol.io';
  const root = join(base, 'root');
  const stateDir = join(base, 'driver');
  mkdirSync(join(root, 'plugins', driverName), { recursive: true });
  writeDriverConfig(stateDir, {
    name: driverName,
    nodeID: 'n1',
    capabilities: ['STAGE_UNSTAGE_VOLUME'],
    ...o.driver,
  });
  const driver = await startTestDriver(join(root, 'plugins', driverName, 'csi.sock'), stateDir);
  const drivers = new DriversStore();
  drivers.set({ name: driverName, endpoint: driver.socket, version: '1.0.0', registrationSocket: '' });
  const csiDriverObject: V1CSIDriver = {
    metadata: { name: driverName },
    spec: o.csiDriver ?? { attachRequired: false },
  };
  const newPlugin = (p: { timeoutMs?: number } = {}) => {
    const pluginMgr = new VolumePluginMgr();
    const host = createVolumeHost({
      rootDir: root,
      nodeName: 'harnessnode',
      mounter: createLinuxMounter({ systemd: 'off' }),
      pluginMgr,
      logger: pino({ level: 'silent' }),
      cluster: {
        csiDrivers: {
          get: (name) => (name === driverName ? csiDriverObject : undefined),
          list: () => [csiDriverObject],
          hasSynced: () => true,
          waitForCacheSync: async () => {},
        },
        ...o.cluster,
      },
    });
    const plugin = csiPlugin({
      drivers,
      timeoutMs: p.timeoutMs ?? o.timeoutMs,
      seLinuxEnabled: o.seLinuxEnabled,
      seLinuxMountFeature: o.seLinuxMountFeature,
      clock: o.clock,
      waitForAttachTimeoutMs: o.waitForAttachTimeoutMs,
      volumesReportedInUse: o.volumesReportedInUse,
    });
    pluginMgr.initPlugins([plugin], host);
    return plugin;
  };
  return {
    root,
    stateDir,
    driverName,
    driver,
    drivers,
    newPlugin,
    plugin: newPlugin(),
    stop: () => driver.stop(),
  };
}

/** Pod `p<pod>` using claim c<pv>, bound to PersistentVolume pv-<pv> (handle vol-<pv>): two pods share a volume with the same `pv`. */
export function claimVolume(
  h: Pick<Harness, 'driverName'>,
  pod: number,
  pv = pod,
  o: { fsType?: string; capacity?: string; handle?: string } = {},
): { pod: V1Pod; spec: Spec; inner: string; uid: string; handle: string } {
  const uid = `00000000-0000-4000-8000-${String(pod).padStart(12, '0')}`;
  const handle = o.handle ?? `vol-${pv}`;
  return {
    uid,
    handle,
    inner: `pv-${pv}`,
    pod: { metadata: { name: `p${pod}`, namespace: 'default', uid } },
    spec: {
      volume: { name: 'data', persistentVolumeClaim: { claimName: `c${pv}` } },
      persistentVolume: {
        metadata: { name: `pv-${pv}` },
        spec: {
          accessModes: ['ReadWriteOnce'],
          ...(o.capacity ? { capacity: { storage: o.capacity } } : {}),
          csi: { driver: h.driverName, volumeHandle: handle, ...(o.fsType ? { fsType: o.fsType } : {}) },
        },
      },
      readOnly: false,
    },
  };
}

/**
 * What the volume manager's mount operation does with the plugin: MountDevice
 * (NodeStageVolume) for a volume it stages, unless `staged`, then SetUp.
 */
export async function setUpVolume(
  plugin: CSIPlugin,
  v: { spec: Spec; pod: V1Pod },
  o: { staged?: boolean } = {},
): Promise<void> {
  if (!o.staged && plugin.getDeviceName(v.spec) !== undefined) await plugin.mountDevice(v.spec, v.pod);
  await plugin.newMounter(v.spec, v.pod).setUp({});
}

/** The volume manager's UnmountDevice of a volume's device (NodeUnstageVolume). */
export function unmountDeviceOf(plugin: CSIPlugin, v: { spec: Spec }): Promise<void> {
  return plugin.unmountDevice(plugin.getDeviceMountPath(v.spec));
}
