// Prometheus metrics. kubelet's own names, labels and buckets where kubelet has
// the metric, podvol_* for the rest. One registry per daemon (no globals), and
// never a label per pod UID or path.
import type { Registry } from 'prom-client';
import client from 'prom-client';
import type { VolumeStatsSummary } from '../plugins/csi/csi-plugin.ts';
import type { VolumeManagerMetrics } from './volumemanager/context.ts';
import type { EmptyDirSample } from './volumemanager/volume-stats.ts';

/** kubelet's storage operation buckets (pkg/volume/util/metrics.go). */
export const storageBuckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

/** A claim's volume statistics (what NodeGetVolumeStats reported), labelled with the claim. */
export interface VolumeStatsSample extends VolumeStatsSummary {
  namespace: string;
  persistentvolumeclaim: string;
}

export interface MetricsSources {
  version: string;
  /** Volumes per plugin in the desired and actual states. */
  volumeCounts(): { plugin: string; desired: number; actual: number }[];
  /** Volumes per plugin and /status state. */
  volumeStates(): { plugin: string; state: string; count: number }[];
  /** kubelet_volume_stats_*: the last NodeGetVolumeStats of each mounted claim. */
  volumeStats?(): VolumeStatsSample[];
  /** podvol_emptydir_*: the last measurement of each mounted emptyDir. */
  emptyDirs?(): EmptyDirSample[];
  podSources(): {
    source: string;
    pods: number;
    synced: boolean;
    lastSyncSeconds?: number;
    watchRestarts?: Record<string, number>;
  }[];
}

export interface Metrics extends VolumeManagerMetrics {
  registry: Registry;
  /** kubelet's csi_operations_seconds: one gRPC call to a CSI driver. */
  csiOperation(driver: string, method: string, grpcStatus: string, seconds: number): void;
}

export function createMetrics(src: MetricsSources): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  // prom-client exports these gauges with a _total suffix, which Prometheus
  // reserves for counters (promtool check metrics rejects them); the same
  // numbers remain available per type in nodejs_active_{handles,requests,resources}.
  for (const name of [
    'nodejs_active_handles_total',
    'nodejs_active_requests_total',
    'nodejs_active_resources_total',
  ]) {
    registry.removeSingleMetric(name);
  }
  const registers = [registry];
  // kubelet's storage histograms share its storage operation buckets.
  const storageHistogram = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new client.Histogram<L>({ name, help, labelNames, buckets: storageBuckets, registers });

  const opDuration = storageHistogram('storage_operation_duration_seconds', 'Storage operation duration', [
    'volume_plugin',
    'operation_name',
    'status',
    'migrated',
  ]);
  new client.Gauge({
    name: 'volume_manager_total_volumes',
    help: 'Number of volumes in Volume Manager',
    labelNames: ['plugin_name', 'state'],
    registers,
    collect() {
      this.reset();
      // kubelet's collector emits only the (plugin, state) pairs it counted: no zero series.
      for (const c of src.volumeCounts()) {
        if (c.desired > 0)
          this.set({ plugin_name: c.plugin || 'N/A', state: 'desired_state_of_world' }, c.desired);
        if (c.actual > 0)
          this.set({ plugin_name: c.plugin || 'N/A', state: 'actual_state_of_world' }, c.actual);
      }
    },
  });
  // kubelet's reconstruction counters: its names and meaning; the help texts
  // say podvol, whose startup it is (an operator reading kubelet there looked for kubelet).
  const counter = (name: string, help: string) => new client.Counter({ name, help, registers });
  const reconstructTotal = counter(
    'reconstruct_volume_operations_total',
    'The number of volumes that were attempted to be reconstructed from the operating system during podvol startup. This includes both successful and failed reconstruction.',
  );
  const reconstructErrors = counter(
    'reconstruct_volume_operations_errors_total',
    'The number of volumes that failed reconstruction from the operating system during podvol startup.',
  );
  const forceCleaned = counter(
    'force_cleaned_failed_volume_operations_total',
    'The number of volumes that were force cleaned after their reconstruction failed during podvol startup. This includes both successful and failed cleanups.',
  );
  const forceCleanErrors = counter(
    'force_cleaned_failed_volume_operation_errors_total',
    'The number of volumes that failed force cleanup after their reconstruction failed during podvol startup.',
  );
  const reconcileDuration = new client.Histogram({
    name: 'podvol_reconcile_duration_seconds',
    help: 'Duration of one reconciler pass',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers,
  });
  new client.Gauge({
    name: 'podvol_pods',
    help: 'Pods known to podvol, by pod source',
    labelNames: ['source'],
    registers,
    collect() {
      this.reset();
      for (const s of src.podSources()) this.set({ source: s.source }, s.pods);
    },
  });
  new client.Gauge({
    name: 'podvol_volumes',
    help: 'Volumes by plugin and state as shown in /status',
    labelNames: ['plugin', 'state'],
    registers,
    collect() {
      this.reset();
      for (const s of src.volumeStates()) this.set({ plugin: s.plugin || 'N/A', state: s.state }, s.count);
    },
  });
  const opErrors = new client.Counter({
    name: 'podvol_operation_errors_total',
    help: 'Failed operations by operation and reason',
    labelNames: ['operation', 'reason'],
    registers,
  });
  new client.Gauge({
    name: 'podvol_pod_source_synced',
    help: '1 once the pod source has listed everything at least once',
    labelNames: ['source'],
    registers,
    collect() {
      this.reset();
      for (const s of src.podSources()) this.set({ source: s.source }, s.synced ? 1 : 0);
    },
  });
  new client.Gauge({
    name: 'podvol_pod_source_last_sync_timestamp_seconds',
    help: 'Unix time of the last successful list, watch event or bookmark of the pod source',
    labelNames: ['source'],
    registers,
    collect() {
      this.reset();
      for (const s of src.podSources())
        if (s.lastSyncSeconds !== undefined) this.set({ source: s.source }, s.lastSyncSeconds);
    },
  });
  new client.Counter({
    name: 'podvol_watch_restarts_total',
    help: 'Watches restarted after an error, a 410 Gone or a silent stream, by resource',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of src.podSources()) {
        for (const [resource, n] of Object.entries(s.watchRestarts ?? {})) this.inc({ resource }, n);
      }
    },
  });
  // kubelet's volume stats (pkg/kubelet/metrics/collectors/volume_stats.go), per claim.
  const statGauge = (name: string, help: string, pick: (s: VolumeStatsSample) => number) =>
    new client.Gauge({
      name,
      help,
      labelNames: ['namespace', 'persistentvolumeclaim'],
      registers,
      collect() {
        this.reset();
        for (const s of src.volumeStats?.() ?? [])
          this.set({ namespace: s.namespace, persistentvolumeclaim: s.persistentvolumeclaim }, pick(s));
      },
    });
  statGauge('kubelet_volume_stats_capacity_bytes', 'Capacity in bytes of the volume', (s) => s.capacityBytes);
  statGauge(
    'kubelet_volume_stats_available_bytes',
    'Number of available bytes in the volume',
    (s) => s.availableBytes,
  );
  statGauge('kubelet_volume_stats_used_bytes', 'Number of used bytes in the volume', (s) => s.usedBytes);
  statGauge('kubelet_volume_stats_inodes', 'Maximum number of inodes in the volume', (s) => s.inodes);
  statGauge('kubelet_volume_stats_inodes_free', 'Number of free inodes in the volume', (s) => s.inodesFree);
  statGauge('kubelet_volume_stats_inodes_used', 'Number of used inodes in the volume', (s) => s.inodesUsed);
  // emptyDir usage against sizeLimit, which kubelet keeps to its eviction manager (no metric).
  // Labelled with the pod's name: a UID is a new series for every pod and means nothing in an alert.
  /**
   * One sample per (namespace, pod, volume): two pods of one name (a pod
   * recreated while the old one's volumes are still mounted) would otherwise
   * pair one's usage with the other's limit. The fuller one is kept, the one
   * an alert is about.
   */
  const emptyDirSamples = (): EmptyDirSample[] => {
    const fill = (s: EmptyDirSample) => (s.sizeLimitBytes ? s.usedBytes / s.sizeLimitBytes : 0);
    const byName = new Map<string, EmptyDirSample>();
    for (const s of src.emptyDirs?.() ?? []) {
      const k = `${s.namespace}\0${s.pod}\0${s.volume}`;
      const prev = byName.get(k);
      if (!prev || fill(s) > fill(prev) || (fill(s) === fill(prev) && s.usedBytes > prev.usedBytes))
        byName.set(k, s);
    }
    return [...byName.values()];
  };
  const emptyDirGauge = (name: string, help: string, pick: (s: EmptyDirSample) => number | undefined) =>
    new client.Gauge({
      name,
      help,
      labelNames: ['namespace', 'pod', 'volume'],
      registers,
      collect() {
        this.reset();
        for (const s of emptyDirSamples()) {
          const v = pick(s);
          if (v !== undefined) this.set({ namespace: s.namespace, pod: s.pod, volume: s.volume }, v);
        }
      },
    });
  emptyDirGauge(
    'podvol_emptydir_used_bytes',
    'Bytes used by a mounted emptyDir volume at its last measurement (every --volume-stats-agg-period)',
    (s) => s.usedBytes,
  );
  emptyDirGauge(
    'podvol_emptydir_size_limit_bytes',
    'The sizeLimit of a mounted emptyDir volume in bytes (only for volumes with one)',
    (s) => s.sizeLimitBytes,
  );
  const csiOps = storageHistogram(
    'csi_operations_seconds',
    'Container Storage Interface operation duration with gRPC error code status total',
    ['driver_name', 'method_name', 'grpc_status_code', 'migrated'],
  );
  new client.Gauge({
    name: 'podvol_build_info',
    help: 'podvol version and the Node.js it runs on',
    labelNames: ['version', 'node_version'],
    registers,
  }).set({ version: src.version, node_version: process.version }, 1);

  return {
    registry,
    operation(plugin, operation, ok, seconds) {
      opDuration.observe(
        {
          volume_plugin: plugin,
          operation_name: operation,
          status: ok ? 'success' : 'fail-unknown',
          migrated: 'false',
        },
        seconds,
      );
    },
    operationError(operation, reason) {
      opErrors.inc({ operation, reason });
    },
    reconcile(seconds) {
      reconcileDuration.observe(seconds);
    },
    csiOperation(driver, method, grpcStatus, seconds) {
      csiOps.observe(
        { driver_name: driver, method_name: method, grpc_status_code: grpcStatus, migrated: 'false' },
        seconds,
      );
    },
    reconstructed(ok) {
      reconstructTotal.inc();
      if (!ok) reconstructErrors.inc();
    },
    forceCleaned(ok) {
      forceCleaned.inc();
      if (!ok) forceCleanErrors.inc();
    },
  };
}
