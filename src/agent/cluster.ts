// Cluster mode: the pods bound to this node from the API server, and the
// API-backed half of the volume host (secrets, configMaps, tokens, trust
// bundles, CSIDrivers, node info, Events).
import { hostname } from 'node:os';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { type Clock, systemClock, type Timer } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { createCSINodeInfoManager } from '../plugins/csi/nodeinfomanager.ts';
import type { NodeInfoManager } from '../plugins/csi/registration.ts';
import type { ClusterBackend } from '../volumehost/host.ts';
import type { ClaimLookup } from '../volumehost/kube/claims.ts';
import { ClaimWatches } from '../volumehost/kube/claims.ts';
import { loadKubeConfig } from '../volumehost/kube/config.ts';
import { CSIDriverInformer } from '../volumehost/kube/csidriver-informer.ts';
import { createEventBroadcaster } from '../volumehost/kube/events.ts';
import { NodeInfo } from '../volumehost/kube/node-info.ts';
import { newConfigMapCache, newSecretCache } from '../volumehost/kube/object-cache.ts';
import { PooledKubeConfig } from '../volumehost/kube/pooled-config.ts';
import { createTokenManager } from '../volumehost/kube/token-manager.ts';
import { createTrustBundleManager } from '../volumehost/kube/trust-bundles.ts';
import { ApiPodSource } from './pods/api-source.ts';
import type { PodSource } from './pods/types.ts';
import { referencedObjects } from './referenced-objects.ts';

export interface Cluster {
  sources: PodSource[];
  backend: ClusterBackend;
  /** Reasons /readyz is not ready yet on the cluster side (CSIDriver informer, node). */
  notReady(): string[];
  /**
   * Keeps secret/configMap/claim watches in step with the pods that reference
   * them. A pod no longer in `pods` keeps its objects while `inUse(uid)` says
   * its volumes are not all torn down yet (kubelet unregisters a pod from its
   * managers only after its volumes are unmounted, in SyncTerminatedPod): a
   * SetUp already running for it (a periodic remount) still finds them.
   * Call again once volumes were torn down, so the objects of such pods go.
   */
  podsChanged(pods: V1Pod[], inUse?: (podUID: string) => boolean): void;
  /** Called with (kind, namespace, name) when a watched secret or configMap changes. */
  onObjectChange(
    listener: (kind: 'secret' | 'configmap' | 'clustertrustbundle', namespace: string, name: string) => void,
  ): void;
  /** PersistentVolumeClaims and their PersistentVolumes, watched while pods refer to them. */
  claims: ClaimLookup & { onChange(listener: () => void): () => void };
  /** The API configuration podvol connected with (CSI, and reviews of HTTP callers). */
  kubeConfig: KubeConfig;
  /** The CSINode object and node annotations that CSI driver registration updates. */
  csiNodeInfo: NodeInfoManager;
  stop(): Promise<void>;
}

export interface ConnectOptions {
  kubeconfig?: string;
  nodeName: string;
  logger: Logger;
  /** Reflector tuning for tests. */
  watchTimeoutSeconds?: number;
  backoff?: { initialMs?: number; maxMs?: number };
  /** Time and timers of the pod source (its reflector, the grace-period wake-ups); default the system's. */
  clock?: Clock;
}

/**
 * podvol runs no containers, so it cannot see them exit as kubelet does. A
 * deleted pod's containers are gone once its grace period is over
 * (metadata.deletionTimestamp), so its volumes are torn down from then on,
 * never earlier.
 */
function gracePeriodOver(pod: V1Pod, now: number): boolean {
  const ts = pod.metadata?.deletionTimestamp;
  return ts !== undefined && ts !== null && new Date(ts).getTime() <= now;
}

/**
 * The API pod source, minus pods past their grace period, and synced only once
 * this node's Node object exists: with a wrong --node-name the pod list is
 * empty but succeeds, and calling that "synced" would tear every volume down.
 */
function adaptApiSource(source: ApiPodSource, nodeKnown: () => boolean, clock: Clock): PodSource {
  const timers = new Set<Timer>();
  const listeners = new Set<() => void>();
  const scheduled = new Set<string>();
  const fire = () => {
    for (const l of [...listeners]) l();
  };
  source.onChange(() => {
    // Wake the listeners again when a terminating pod's grace period ends.
    for (const p of source.pods()) {
      const ts = p.metadata?.deletionTimestamp;
      const key = `${p.metadata?.uid}@${ts}`;
      if (ts === undefined || ts === null || scheduled.has(key)) continue;
      scheduled.add(key);
      const delay = Math.max(0, new Date(ts).getTime() - clock.now()) + 10;
      const timer = clock.after(
        delay,
        () => {
          timers.delete(timer);
          fire();
        },
        { unref: true },
      );
      timers.add(timer);
    }
  });
  return {
    name: source.name,
    start: () => source.start(),
    errors: () => source.errors(),
    stats: () => source.stats(),
    pods: () => source.pods().filter((p) => !gracePeriodOver(p, clock.now())),
    hasSynced: () => source.hasSynced() && nodeKnown(),
    onChange(listener: () => void) {
      listeners.add(listener);
      const off = source.onChange(listener);
      return () => {
        listeners.delete(listener);
        off();
      };
    },
    async stop() {
      for (const t of timers) t.cancel();
      await source.stop();
    },
  };
}

export async function connectCluster(o: ConnectOptions): Promise<Cluster> {
  const kubeConfig = loadKubeConfig({ kubeconfig: o.kubeconfig });
  const logger = o.logger.child({ component: 'cluster' });
  const clock = o.clock ?? systemClock();
  // Every informer and API client of the cluster runs on the one clock.
  const tuning = {
    kubeConfig,
    logger,
    watchTimeoutSeconds: o.watchTimeoutSeconds,
    backoff: o.backoff,
    clock,
  };
  const pods = new ApiPodSource({ ...tuning, nodeName: o.nodeName });
  const csiDrivers = new CSIDriverInformer(tuning);
  const node = new NodeInfo({ ...tuning, nodeName: o.nodeName });
  const secrets = newSecretCache(tuning);
  const configMaps = newConfigMapCache(tuning);
  const claims = new ClaimWatches(tuning);
  const tokens = createTokenManager({ kubeConfig, logger, clock });
  const trustBundles = createTrustBundleManager(tuning);
  const events = createEventBroadcaster({
    kubeConfig,
    component: 'podvol',
    host: o.nodeName,
    instance: hostname(),
    logger,
    clock,
  });
  logger.info(
    { server: kubeConfig.getCurrentCluster()?.server, node: o.nodeName },
    'connecting to the API server',
  );
  void csiDrivers.start();
  void node.start();

  const registered = new Map<string, ReturnType<typeof referencedObjects>>();
  const none = () => ({
    secrets: new Set<string>(),
    configMaps: new Set<string>(),
    claims: new Set<string>(),
  });
  const split = (key: string) => [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)] as const;

  return {
    sources: [adaptApiSource(pods, () => node.node() !== undefined, clock)],
    backend: {
      kubeConfig,
      getSecret: (ns, name) => secrets.get(ns, name),
      getConfigMap: (ns, name) => configMaps.get(ns, name),
      getServiceAccountToken: (ns, name, tr) => tokens.getServiceAccountToken(ns, name, tr),
      deleteServiceAccountToken: (uid) => tokens.deleteServiceAccountToken(uid),
      getTrustAnchorsByName: (name, allowMissing) => trustBundles.getTrustAnchorsByName(name, allowMissing),
      getTrustAnchorsBySigner: (signer, sel, allowMissing) =>
        trustBundles.getTrustAnchorsBySigner(signer, sel, allowMissing),
      eventRecorder: events,
      csiDrivers: csiDrivers,
      node: () => node.snapshot(),
    },
    notReady: () => {
      const reasons: string[] = [];
      if (!csiDrivers.hasSynced()) reasons.push('CSIDriver informer has not synced');
      if (!node.hasSynced()) reasons.push(`node "${o.nodeName}" not listed yet`);
      else if (!node.node()) {
        reasons.push(
          `node "${o.nodeName}" does not exist on the API server: pods are not considered synced and nothing is torn down until it does (is --node-name right?)`,
        );
      }
      return reasons;
    },
    podsChanged(all, inUse = () => false) {
      const seen = new Set<string>();
      for (const pod of all) {
        const uid = pod.metadata?.uid;
        if (!uid) continue;
        seen.add(uid);
        const next = referencedObjects(pod);
        const prev = registered.get(uid) ?? none();
        for (const k of next.claims) if (!prev.claims.has(k)) claims.registerClaim(...split(k), uid);
        for (const k of prev.claims) if (!next.claims.has(k)) claims.unregisterClaim(...split(k), uid);
        for (const k of next.secrets) if (!prev.secrets.has(k)) secrets.register(...split(k), uid);
        for (const k of next.configMaps) if (!prev.configMaps.has(k)) configMaps.register(...split(k), uid);
        for (const k of prev.secrets) if (!next.secrets.has(k)) secrets.unregister(...split(k), uid);
        for (const k of prev.configMaps) if (!next.configMaps.has(k)) configMaps.unregister(...split(k), uid);
        registered.set(uid, next);
      }
      for (const [uid, prev] of registered) {
        if (seen.has(uid) || inUse(uid)) continue;
        for (const k of prev.secrets) secrets.unregister(...split(k), uid);
        for (const k of prev.configMaps) configMaps.unregister(...split(k), uid);
        for (const k of prev.claims) claims.unregisterClaim(...split(k), uid);
        registered.delete(uid);
      }
    },
    onObjectChange(listener) {
      secrets.onChange((ns, name) => listener('secret', ns, name));
      configMaps.onChange((ns, name) => listener('configmap', ns, name));
      trustBundles.onChange?.((name) => listener('clustertrustbundle', '', name));
    },
    claims,
    kubeConfig,
    csiNodeInfo: createCSINodeInfoManager(kubeConfig, o.nodeName),
    async stop() {
      tokens.stop();
      events.stop();
      await Promise.all([
        csiDrivers.stop(),
        node.stop(),
        secrets.stop(),
        configMaps.stop(),
        claims.stop(),
        trustBundles.stop?.(),
      ]);
      // Idle pooled connections would close by themselves a few seconds later; a request still
      // made after this (a SetUp the volume manager drains) gets a new pool.
      if (kubeConfig instanceof PooledKubeConfig) await kubeConfig.close();
    },
  };
}
