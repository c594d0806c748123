// The reflector's store (client-go's cache.Store keyed by UID): applies a full
// list or one watch event and says which ADDED/MODIFIED/DELETED events that makes.
import type { V1ObjectMeta } from '@kubernetes/client-node';

export interface KubeObject {
  metadata?: V1ObjectMeta;
}

export type ReflectorEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface ReflectorEvent<T> {
  type: ReflectorEventType;
  object: T;
  /** The stored object this one replaces (MODIFIED) or removes (DELETED). */
  old?: T;
}

const defaultKey = (o: KubeObject): string =>
  o.metadata?.uid ?? `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

const nsName = (o: KubeObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

export class Store<T extends KubeObject> {
  readonly #keyOf: (o: T) => string;
  readonly #items = new Map<string, T>();
  /** namespace/name → key, to spot a re-created object under a new UID. */
  readonly #keyByName = new Map<string, string>();

  constructor(keyOf?: (o: T) => string) {
    this.#keyOf = keyOf ?? defaultKey;
  }

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  list(): T[] {
    return [...this.#items.values()];
  }

  /** Replaces everything with a fresh list; returns the events that turn the old content into the new. */
  replace(items: readonly T[]): ReflectorEvent<T>[] {
    const fresh = new Map<string, T>();
    for (const o of items) fresh.set(this.#keyOf(o), o);
    const events: ReflectorEvent<T>[] = [];
    for (const [k, old] of this.#items) {
      if (!fresh.has(k)) events.push({ type: 'DELETED', object: old, old });
    }
    for (const [k, o] of fresh) {
      const old = this.#items.get(k);
      if (!old) events.push({ type: 'ADDED', object: o });
      else if (old.metadata?.resourceVersion !== o.metadata?.resourceVersion) {
        events.push({ type: 'MODIFIED', object: o, old });
      }
    }
    this.#items.clear();
    this.#keyByName.clear();
    for (const [k, o] of fresh) {
      this.#items.set(k, o);
      this.#keyByName.set(nsName(o), k);
    }
    return events;
  }

  /** Applies one ADDED/MODIFIED/DELETED watch event; returns the resulting events (none if nothing changed). */
  apply(type: ReflectorEventType, obj: T): ReflectorEvent<T>[] {
    const key = this.#keyOf(obj);
    const events: ReflectorEvent<T>[] = [];
    if (type === 'DELETED') {
      const old = this.#items.get(key);
      if (!old) return events;
      this.#items.delete(key);
      if (this.#keyByName.get(nsName(old)) === key) this.#keyByName.delete(nsName(old));
      events.push({ type: 'DELETED', object: obj, old });
    } else {
      // namespace/name is unique at any moment: an object under another key
      // with the same name is gone even if its DELETED event was missed.
      const other = this.#keyByName.get(nsName(obj));
      if (other !== undefined && other !== key) {
        const o = this.#items.get(other);
        if (o) {
          this.#items.delete(other);
          events.push({ type: 'DELETED', object: o, old: o });
        }
      }
      const old = this.#items.get(key);
      this.#items.set(key, obj);
      this.#keyByName.set(nsName(obj), key);
      events.push(old ? { type: 'MODIFIED', object: obj, old } : { type: 'ADDED', object: obj });
    }
    return events;
  }
}
