// What kubelet's csiPlugin struct (csi_plugin.go) holds for its attacher,
// mounter and expander, as one object the plugin builds at init: the volume
// host and its directories, the drivers' clients (csi_client.go
// newCsiDriverClient), the CSIDriver lister, secrets (csi_util.go
// getCredentialsFromSecret), the capability of a volume's requests, and the
// phases /status shows. Every host access of the CSI code goes through the
// host's seams from here (its fs ops and mounter), never node:fs.
import type { V1CSIDriver, V1Pod, V1Secret, V1SecretReference } from '@kubernetes/client-node';
import { type Clock, systemClock } from '../../clock.ts';
import { errorMessage } from '../../errno.ts';
import type { FsOps } from '../../volumehost/fs.ts';
import { escapeQualifiedName } from '../../volumehost/paths.ts';
import { hostSELinuxEnabled } from '../../volumehost/selinux-host.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { type Spec, VolumeError } from '../../volumehost/volume.ts';
import { addSELinuxMountOption, mountSELinuxLabel } from '../util/selinux.ts';
import { CSIClient, type CSIDriverClient, type NodeCapability, type VolumeCapability } from './client.ts';
import { csiAccessMode, rpcError, type Source } from './csi-util.ts';
import type { DriversStore } from './drivers.ts';
import type { CSIProto } from './grpc.ts';
import { type CSIProtoSource, lazyCSIProto } from './grpc-status.ts';
import { csiPluginName, volDataKey } from './vol-data.ts';
import { VolumeIndex } from './volume-index.ts';

/**
 * The Kubernetes client is loaded only when an API call is made (cluster mode):
 * loading it costs a standalone podvol about 80 MiB and seconds of start-up.
 */
export const kubeClient = () => import('@kubernetes/client-node');

const escapedName = escapeQualifiedName(csiPluginName);

export interface CSIPluginOptions {
  drivers: DriversStore;
  /** Default: loaded (with gRPC) at the first CSI call. */
  proto?: CSIProto | CSIProtoSource;
  /** Per-call deadline; kubelet's is 2 minutes. */
  timeoutMs?: number;
  /**
   * How long a volume waits for its VolumeAttachment to be attached before the
   * wait fails with an Event (kubelet's waitForAttachTimeout, 10 minutes).
   */
  waitForAttachTimeoutMs?: number;
  /** The attach wait's time (default: the system clock). */
  clock?: Clock;
  /**
   * The unique names this node has reported in node.status.volumesInUse. An
   * attachable volume is used only once it is there (kubelet's ReportedInUse).
   */
  volumesReportedInUse?: () => ReadonlySet<string>;
  /** csi_operations_seconds, per driver. */
  observe?: (driver: string, method: string, code: string, seconds: number) => void;
  /**
   * Whether the host has SELinux enabled (kubelet's SELinuxLabelTranslator
   * SELinuxEnabled: go-selinux's GetEnabled). Default: read from the host
   * once. Without it nothing SELinux-specific is done, as in kubelet; tests
   * force it on to see what a driver on an SELinux host receives.
   */
  seLinuxEnabled?: () => boolean;
  /**
   * kubelet's SELinuxMount feature gate (beta, off by default): mount every
   * PersistentVolume with the pod's SELinux context, not only
   * ReadWriteOncePod ones. Default false.
   */
  seLinuxMountFeature?: boolean;
  /**
   * The client of a driver, instead of one over the socket it registered in
   * `drivers` (which is then not consulted): `podvol plan`'s recording driver.
   */
  newClient?: (driver: string) => CSIDriverClient;
  /**
   * Where the stage and publish secrets are read (default: the API server,
   * through the host's kubeconfig; StandaloneMode without one): `podvol
   * plan`'s placeholder secrets.
   */
  getSecret?: (namespace: string, name: string) => Promise<V1Secret>;
}

/** The capability NodeStageVolume and NodePublishVolume both send, and what SELinux adds to the json files. */
export interface MountCapability {
  capability: VolumeCapability;
  /** The context the volume is mounted with (`-o context=`), '' for none. */
  seLinuxLabel: string;
  /** seLinuxMountContext for vol_data.json when there is a label. */
  seLinuxData: Record<string, string>;
}

export interface CSIContext {
  readonly o: CSIPluginOptions;
  readonly clock: Clock;
  host(): VolumeHost;
  fs(): FsOps;
  /** <root>/plugins/kubernetes.io/csi */
  pluginDir(): string;
  /** <root>/pods/<uid>/volumes/kubernetes.io~csi/<inner> */
  podVolumeDir(podUID: string, inner: string): string;
  /** Which pod directories publish each staged volume (volume-index.ts). */
  readonly index: VolumeIndex;
  /** The phase each pod volume's SetUp is in (attaching, staging, publishing), by `<uid>/<inner>`. */
  readonly phases: Map<string, string>;
  clientFor(driver: string): CSIDriverClient;
  capabilities(client: CSIDriverClient): Promise<Set<NodeCapability>>;
  csiDriverObject(driver: string): V1CSIDriver | undefined;
  /** kubelet's CanAttach: attach is required unless the driver's CSIDriver object says attachRequired: false. */
  attachRequired(driver: string): boolean;
  secretData(ref: V1SecretReference | undefined): Promise<Record<string, string>>;
  seLinuxEnabled(): boolean;
  mountCapability(
    spec: Spec,
    pod: V1Pod,
    src: Source,
    driverObj: V1CSIDriver | undefined,
    caps: Set<NodeCapability>,
    fsGroup: number | undefined,
  ): MountCapability;
  /** Shutdown: cancels every call in flight and later; the number that were in flight. */
  cancelCalls(): number;
  init(host: VolumeHost): void;
}

/** kubelet's getCredentialsFromSecret: a Get of the secret from the API server. */
function apiSecret(host: VolumeHost): (namespace: string, name: string) => Promise<V1Secret> {
  const kc = host.getKubeConfig();
  if (!kc)
    return async () => {
      throw new VolumeError(
        'StandaloneMode',
        'CSI secrets need the API server (podvol runs in standalone mode)',
      );
    };
  return async (namespace, name) =>
    kc.makeApiClient((await kubeClient()).CoreV1Api).readNamespacedSecret({ name, namespace });
}

export function createCSIContext(o: CSIPluginOptions): CSIContext {
  let host: VolumeHost | undefined;
  const proto = o.proto ?? lazyCSIProto();
  const shutdown = new AbortController();
  /** Calls in flight, for the shutdown log. */
  let inFlight = 0;
  let hostSELinux: boolean | undefined;
  const seLinuxEnabled = o.seLinuxEnabled ?? (() => (hostSELinux ??= hostSELinuxEnabled()));
  const theHost = (): VolumeHost => {
    if (!host) throw new Error('kubernetes.io/csi: plugin used before init');
    return host;
  };
  const pluginDir = () => theHost().getPluginDir(csiPluginName);
  const fs = () => theHost().getFs().ops;
  const csiDriverObject = (driver: string) => theHost().csiDriverLister()?.get(driver);
  return {
    o,
    clock: o.clock ?? systemClock(),
    host: theHost,
    fs,
    pluginDir,
    podVolumeDir: (podUID, inner) => theHost().getPodVolumeDir(podUID, escapedName, inner),
    index: new VolumeIndex(() => ({ fs: fs(), podsDir: theHost().getPodsDir(), pluginDir: pluginDir() })),
    phases: new Map(),
    init(h) {
      host = h;
    },
    clientFor(driver) {
      if (o.newClient) return o.newClient(driver);
      const d = o.drivers.get(driver);
      if (!d) {
        throw new VolumeError(
          'DriverNotRegistered',
          `kubernetes.io/csi: failed to get CSI client: driver name ${driver} not found in the list of registered CSI drivers`,
        );
      }
      const observe = o.observe;
      return new CSIClient(proto, d.endpoint, {
        timeoutMs: o.timeoutMs,
        signal: shutdown.signal,
        observe: (method, code, seconds) => {
          inFlight--;
          observe?.(driver, method, code, seconds);
        },
        onStart: () => {
          inFlight++;
        },
      });
    },
    async capabilities(client) {
      try {
        return await client.nodeGetCapabilities();
      } catch (err) {
        throw rpcError('NodeGetCapabilities', err);
      }
    },
    csiDriverObject,
    attachRequired: (driver) => csiDriverObject(driver)?.spec?.attachRequired !== false,
    async secretData(ref) {
      if (!ref?.name) return {};
      const ns = ref.namespace ?? 'default';
      const read = o.getSecret ?? apiSecret(theHost());
      try {
        const s = await read(ns, ref.name);
        const out: Record<string, string> = {};
        for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
        return out;
      } catch (err) {
        if (err instanceof VolumeError) throw err;
        throw new VolumeError(
          'SecretNotFound',
          `failed to get secret ${ns}/${ref.name}: ${errorMessage(err)}`,
        );
      }
    },
    seLinuxEnabled,
    mountCapability(spec, pod, src, driverObj, caps, fsGroup) {
      const accessMode = csiAccessMode(src.accessModes, caps.has('SINGLE_NODE_MULTI_WRITER'));
      const mountGroup = caps.has('VOLUME_MOUNT_GROUP') && fsGroup !== undefined ? String(fsGroup) : '';
      // kubelet's SupportsSELinuxContextMount (the CSIDriver's seLinuxMount) and
      // the desired state's label: the same context for NodeStage and NodePublish.
      const seLinuxLabel = mountSELinuxLabel(spec, pod, {
        seLinuxEnabled: seLinuxEnabled(),
        pluginSupportsSELinuxContextMount: driverObj?.spec?.seLinuxMount === true,
        seLinuxMountGate: o.seLinuxMountFeature === true,
      });
      const mountFlags =
        seLinuxLabel === '' ? src.mountOptions : addSELinuxMountOption(src.mountOptions, seLinuxLabel);
      return {
        capability: {
          mount: { fs_type: src.fsType, mount_flags: mountFlags, volume_mount_group: mountGroup },
          access_mode: { mode: accessMode },
        },
        seLinuxLabel,
        seLinuxData:
          seLinuxLabel === ''
            ? {}
            : ({ [volDataKey.seLinuxMountContext]: seLinuxLabel } as Record<string, string>),
      };
    },
    cancelCalls() {
      const n = inFlight;
      shutdown.abort();
      return n;
    },
  };
}
