// Merges the pod sources (static files, API server) into one view keyed by UID.
import type { V1Pod } from '@kubernetes/client-node';
import type { PodSource, SourceError } from './pods/types.ts';

export interface PodManager {
  pods(): V1Pod[];
  errors(): SourceError[];
  /** Every source has listed everything once: only then may anything be unmounted. */
  allSourcesReady(): boolean;
  sources: readonly PodSource[];
}

export function createPodManager(sources: PodSource[]): PodManager {
  return {
    sources,
    pods() {
      const byUID = new Map<string, V1Pod>();
      for (const s of sources) {
        for (const p of s.pods()) {
          const uid = p.metadata?.uid;
          if (uid && !byUID.has(uid)) byUID.set(uid, p);
        }
      }
      return [...byUID.values()];
    },
    errors: () => sources.flatMap((s) => s.errors()),
    allSourcesReady: () => sources.every((s) => s.hasSynced()),
  };
}
