// Merges the pod sources (static files, API server) into one view keyed by UID,
// with the annotations kubelet's pod config adds to every pod it sees
// (kubernetes.io/config.source and kubernetes.io/config.seen), which the
// downward API renders like any other annotation.
import type { V1Pod } from '@kubernetes/client-node';
import {
  CONFIG_SEEN_ANNOTATION,
  CONFIG_SOURCE_ANNOTATION,
  type PodSource,
  type SourceError,
} from './pods/types.ts';

export interface PodManager {
  pods(): V1Pod[];
  errors(): SourceError[];
  /** Every source has listed everything once: only then may anything be unmounted. */
  allSourcesReady(): boolean;
  sources: readonly PodSource[];
}

/** Go's time.RFC3339Nano in UTC: fractional seconds without trailing zeros. */
export function rfc3339Nano(d: Date): string {
  return d.toISOString().replace(/\.(\d*?)0*Z$/, (_m, frac: string) => (frac ? `.${frac}Z` : 'Z'));
}

export function createPodManager(sources: PodSource[], now: () => Date = () => new Date()): PodManager {
  const firstSeen = new Map<string, string>();
  // One annotated copy per source object, so an unchanged pod stays the same object.
  const annotated = new WeakMap<V1Pod, V1Pod>();
  const annotate = (pod: V1Pod, source: string): V1Pod => {
    const cached = annotated.get(pod);
    if (cached) return cached;
    const uid = pod.metadata?.uid ?? '';
    let seen = firstSeen.get(uid);
    if (!seen) {
      seen = rfc3339Nano(now());
      firstSeen.set(uid, seen);
    }
    const annotations = { ...(pod.metadata?.annotations ?? {}) };
    annotations[CONFIG_SOURCE_ANNOTATION] ??= source;
    annotations[CONFIG_SEEN_ANNOTATION] ??= seen;
    const copy = { ...pod, metadata: { ...pod.metadata, annotations } };
    annotated.set(pod, copy);
    return copy;
  };
  return {
    sources,
    pods() {
      const byUID = new Map<string, V1Pod>();
      for (const s of sources) {
        for (const p of s.pods()) {
          const uid = p.metadata?.uid;
          if (uid && !byUID.has(uid)) byUID.set(uid, annotate(p, s.name));
        }
      }
      for (const uid of firstSeen.keys()) if (!byUID.has(uid)) firstSeen.delete(uid);
      return [...byUID.values()];
    },
    errors: () => sources.flatMap((s) => s.errors()),
    allSourcesReady: () => sources.every((s) => s.hasSynced()),
  };
}
