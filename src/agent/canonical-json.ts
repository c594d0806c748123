// One JSON text per value, whatever the key order: the static pod source
// hashes pods with it (a pod's UID) and the reconciler compares volume specs
// with it. A module of its own so that a pod source need not depend on the
// reconciler.

/**
 * JSON with sorted keys and without null/undefined members: the same volume
 * from a list (client-node model objects), a watch event (plain JSON) or a
 * record on disk must compare equal whatever the key order.
 */
export function canonicalJSON(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .filter((k) => v[k] !== undefined && v[k] !== null)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}
