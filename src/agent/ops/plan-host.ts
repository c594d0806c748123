// What `podvol plan` runs the plugins against: a VolumeHost like the daemon's
// whose mounter is the recording one of plan-mounter.ts (its table starts as
// this host's, read from /proc/self/mountinfo) and whose filesystem is the
// recording overlay of plan-fs.ts, and whose CSI plugin is the daemon's with
// plan-csi.ts's recording driver behind it. Every mount, unmount, filesystem
// change and driver call is reported to `record`; nothing reaches the host.
import { resolve } from 'node:path';
import type { V1ConfigMap, V1CSIDriver, V1Pod, V1Secret } from '@kubernetes/client-node';
import { readMountInfo } from '../../mount/mountinfo.ts';
import type * as mount from '../../mount/types.ts';
import { csiPlugin } from '../../plugins/csi/csi-plugin.ts';
import { DriversStore } from '../../plugins/csi/drivers.ts';
import { probeVolumePlugins } from '../../plugins/index.ts';
import { type ClusterBackend, createVolumeHost } from '../../volumehost/host.ts';
import type { ClaimLookup } from '../../volumehost/kube/claims.ts';
import { VolumePluginMgr } from '../../volumehost/plugin-manager.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { type DriverStep, recordingDriver } from './plan-csi.ts';
import { createPlanFs, type FsStep, type PlanFs } from './plan-fs.ts';
import { createPlanMounter, type MountStep } from './plan-mounter.ts';

/** A host operation as the plan reports it, before it is labelled with its pod and volume. */
export type HostStep = FsStep | DriverStep | MountStep | { action: 'fetch'; detail: string };

export interface PlanContext {
  /** Absolute, as the daemon resolves it. */
  rootDir: string;
  nodeName: string;
  host: VolumeHost;
  pluginMgr: VolumePluginMgr;
  mounter: mount.Interface;
  fs: PlanFs;
  /** Where steps go; plan.ts points it at the pod and volume being planned. */
  sink: { onStep(step: HostStep): void };
  /** The API objects' contents are unknown: each placeholder file's text says what it stands for. */
  placeholders: Map<string, string>;
  /** What the desired state resolves claims through (none: a claim waits). */
  claims?: ClaimLookup;
}

export interface PlanContextOptions {
  rootDir: string;
  nodeName: string;
  /** Node allocatable (default: the machine's, as a standalone podvol uses). */
  allocatable?: Record<string, string>;
  /**
   * 'placeholder' (default): secrets, configMaps, tokens and trust bundles are
   * assumed to exist (a `fetch` step names each; their files hold a placeholder).
   * 'standalone': they fail as in `podvol run` without an API server.
   */
  api?: 'placeholder' | 'standalone';
  /** The daemon's umask (default 022, systemd's and the container runtime's). */
  umask?: number;
  /** --host-root of the daemon: where hostPaths are (default /). */
  hostRoot?: string;
  /**
   * With 'placeholder': CSIDriver objects as the API server would list them.
   * A driver not among them is assumed to exist and allow the volume's
   * lifecycle mode (its `fetch` step says so).
   */
  csiDrivers?: V1CSIDriver[];
  /**
   * The claims and PersistentVolumes the daemon's claim watches would see
   * (default none: a claim waits, as without an API server).
   */
  claims?: ClaimLookup;
}

/** API objects that exist, with a placeholder for every key a pod names (or one `<key>` file). */
function placeholderApi(
  pods: () => V1Pod[],
  known: readonly V1CSIDriver[],
  placeholders: Map<string, string>,
  record: (s: HostStep) => void,
): ClusterBackend {
  const mark = (what: string) => {
    const text = `<${what}>`;
    placeholders.set(text, what);
    return text;
  };
  const keysOf = (kind: 'secret' | 'configMap', ns: string, name: string): string[] => {
    const keys = new Set<string>();
    let all = false;
    for (const pod of pods()) {
      if ((pod.metadata?.namespace ?? 'default') !== ns) continue;
      for (const v of pod.spec?.volumes ?? []) {
        const refs = [
          kind === 'secret' ? v.secret && { name: v.secret.secretName, items: v.secret.items } : v.configMap,
          ...(v.projected?.sources ?? []).map((s) => (kind === 'secret' ? s.secret : s.configMap)),
        ];
        for (const r of refs) {
          if (!r || r.name !== name) continue;
          if (!r.items || r.items.length === 0) all = true;
          for (const i of r.items ?? []) keys.add(i.key);
        }
      }
    }
    if (all || keys.size === 0) keys.add('<key>');
    return [...keys];
  };
  const drivers = new Set<string>();
  const object = (kind: 'secret' | 'configMap', ns: string, name: string) => {
    record({ action: 'fetch', detail: `${kind} ${ns}/${name} (needs the API server)` });
    return keysOf(kind, ns, name).map((k) => [k, mark(`key "${k}" of ${kind} ${ns}/${name}`)] as const);
  };
  return {
    getSecret: async (ns, name): Promise<V1Secret> => ({
      data: Object.fromEntries(
        object('secret', ns, name).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      ),
    }),
    getConfigMap: async (ns, name): Promise<V1ConfigMap> => ({
      data: Object.fromEntries(object('configMap', ns, name)),
    }),
    getServiceAccountToken: async (ns, name, tr) => {
      const audience = tr.spec?.audiences?.[0];
      record({
        action: 'fetch',
        detail: `serviceAccountToken of ${ns}/${name} (${audience ? `audience "${audience}", ` : ''}expirationSeconds ${tr.spec?.expirationSeconds ?? 3600}; needs the API server)`,
      });
      return {
        ...tr,
        status: { token: mark(`the token of ${ns}/${name}`), expirationTimestamp: new Date(0) },
      };
    },
    getTrustAnchorsByName: async (name) => {
      record({ action: 'fetch', detail: `clusterTrustBundle ${name} (needs the API server)` });
      return mark(`the PEM bundle ${name}`);
    },
    // An inline CSI volume needs its driver's CSIDriver object (its volumeLifecycleModes); assumed to allow it.
    csiDrivers: {
      get: (name) => {
        // The daemon's informer lists them all once; the plan names each driver once.
        const given = known.find((d) => d.metadata?.name === name);
        if (!drivers.has(name)) {
          drivers.add(name);
          record({
            action: 'fetch',
            detail: `CSIDriver ${name} (needs the API server${given ? '' : "; assumed to allow the volume's lifecycle mode"})`,
          });
        }
        return given ?? { metadata: { name }, spec: { volumeLifecycleModes: ['Persistent', 'Ephemeral'] } };
      },
      list: () => [],
      hasSynced: () => true,
      waitForCacheSync: async () => {},
    },
    getTrustAnchorsBySigner: async (signer) => {
      record({ action: 'fetch', detail: `clusterTrustBundles of signer ${signer} (needs the API server)` });
      return mark(`the PEM bundles of signer ${signer}`);
    },
  };
}

export async function createPlanContext(
  o: PlanContextOptions,
  pods: () => V1Pod[] = () => [],
): Promise<PlanContext> {
  const rootDir = resolve(o.rootDir);
  const pluginMgr = new VolumePluginMgr();
  const sink = { onStep(_: HostStep) {} };
  const record = (s: HostStep) => sink.onStep(s);
  // Read only: the plan's mounts start from this host's table, so paths under existing mounts are judged right.
  const mounter = createPlanMounter({ mounts: await readMountInfo(), fs: () => fs, record });
  const fs = createPlanFs({ mounts: () => mounter.table(), umask: o.umask, record });
  const placeholders = new Map<string, string>();
  const api: ClusterBackend =
    o.api === 'standalone' ? {} : placeholderApi(pods, o.csiDrivers ?? [], placeholders, record);
  const allocatable = o.allocatable;
  const host = createVolumeHost({
    rootDir,
    nodeName: o.nodeName,
    hostRoot: o.hostRoot,
    mounter,
    fs,
    pluginMgr,
    cluster: {
      ...api,
      ...(allocatable
        ? { node: () => ({ labels: { 'kubernetes.io/hostname': o.nodeName }, allocatable }) }
        : {}),
    },
  });
  // The daemon's CSI plugin; no driver registers in a plan, every driver is the recording one.
  const csi = csiPlugin({
    drivers: new DriversStore(),
    newClient: (driver) => recordingDriver(driver, record, { nodeName: o.nodeName }),
    // Without it the daemon's own rule: the API server, here none (StandaloneMode).
    ...(api.getSecret ? { getSecret: api.getSecret } : {}),
  });
  pluginMgr.initPlugins([...probeVolumePlugins(), csi], host);
  return {
    rootDir,
    nodeName: o.nodeName,
    host,
    pluginMgr,
    mounter,
    fs,
    sink,
    placeholders,
    claims: o.claims,
  };
}
