// A bounded cache of review answers with a time-to-live per entry, and one
// request in flight per key: a burst of scrapes with the same token costs one
// TokenReview, as with the API server library's cached token authenticator.
// Failures to get an answer are never cached.

export interface ReviewCache<V> {
  /** The cached answer for `key`, else the one `load` gives (shared with concurrent callers). */
  get(key: string, load: () => Promise<V>): Promise<V>;
  size(): number;
}

export function createReviewCache<V>(opts: {
  /** How long an answer stays valid; 0 disables caching of that answer. */
  ttlMs: (value: V) => number;
  maxEntries?: number;
  now?: () => number;
}): ReviewCache<V> {
  const now = opts.now ?? Date.now;
  const max = opts.maxEntries ?? 4096;
  const entries = new Map<string, { value: V; expires: number }>();
  const inflight = new Map<string, Promise<V>>();
  return {
    async get(key, load) {
      const hit = entries.get(key);
      if (hit && hit.expires > now()) return hit.value;
      if (hit) entries.delete(key);
      const pending = inflight.get(key);
      if (pending) return pending;
      const p = load().then((value) => {
        const ttl = opts.ttlMs(value);
        if (ttl > 0) {
          // Oldest first: a Map iterates in insertion order.
          for (const oldest of entries.keys()) {
            if (entries.size < max) break;
            entries.delete(oldest);
          }
          entries.set(key, { value, expires: now() + ttl });
        }
        return value;
      });
      inflight.set(key, p);
      try {
        return await p;
      } finally {
        inflight.delete(key);
      }
    },
    size: () => entries.size,
  };
}
