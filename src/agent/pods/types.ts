// The contract between where pods come from (static manifests, the API
// server) and the volume manager that acts on them. Kept small on purpose:
// every source implements exactly this and nothing else leaks out.
import type { V1Pod } from '@kubernetes/client-node';
import type { SourceReason } from '../../reasons.ts';

// The annotations kubelet's pod config puts on every pod it sees
// (pkg/kubelet/types/pod_update.go), named once here for the sources, the pod
// manager and the runtime.
/** Which source a pod came from: 'file' for a static pod, 'api' for the API server. */
export const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';
/** When the pod was first seen (ConfigFirstSeenAnnotationKey). */
export const CONFIG_SEEN_ANNOTATION = 'kubernetes.io/config.seen';
/** A static pod's content hash, which is its UID. */
export const CONFIG_HASH_ANNOTATION = 'kubernetes.io/config.hash';

/** One input that could not be turned into a pod, e.g. an invalid manifest document. */
export interface SourceError {
  /** The PodSource name that produced it ('file', 'api'). */
  source: string;
  /** Manifest file the document came from (file source only). */
  file?: string;
  /** 1-based position of the document within its file (file source only). */
  document?: number;
  namespace?: string;
  name?: string;
  reason: SourceReason;
  message: string;
  /** How many more errors the same file has (the file source reports one error per file). */
  furtherErrors?: number;
}

export interface PodSource {
  /** 'file' | 'api' */
  readonly name: string;
  /** Begins watching; never throws on bad input. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** True once a full first read/list succeeded. */
  hasSynced(): boolean;
  /** Why the source cannot read its input at the moment (its last read failed), for /readyz. */
  problem?(): string | undefined;
  /**
   * Current snapshot, defaulted, unique by metadata.uid. The objects are
   * shared with the source: treat them as read-only.
   */
  pods(): V1Pod[];
  /** Current invalid inputs. */
  errors(): SourceError[];
  /** Called after any change of pods() or errors(); returns an unsubscribe function. */
  onChange(listener: () => void): () => void;
  /** Freshness figures for metrics. */
  stats(): PodSourceStats;
}

export interface PodSourceStats {
  /** When the source last read everything successfully, in seconds since the epoch. */
  lastSyncSeconds?: number;
  /** Watch restarts per watched resource (API sources). */
  watchRestarts?: Record<string, number>;
}
