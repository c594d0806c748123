// In-memory object store of the test API server: one global, monotonically
// increasing resourceVersion (like etcd's revision), an event history that
// watches replay from, and a compaction point below which resourceVersions
// are answered with 410 Gone.
import { randomUUID } from 'node:crypto';
import { at } from '../helpers/must.ts';
import { defaultStoredPod } from './defaulting.ts';
import { apiVersionOf, type ResourceDef } from './resources.ts';
import type { KubeObj, Matcher } from './selectors.ts';
import { alreadyExists, conflict, notFound, StatusError, tooOld } from './status.ts';

export type { KubeObj } from './selectors.ts';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoredEvent {
  rv: number;
  resource: string;
  type: WatchEventType;
  object: KubeObj;
  /** The object before a MODIFIED event, so selector watches can turn it into ADDED/DELETED. */
  prev?: KubeObj;
}

export interface WatchFilter {
  namespace?: string;
  matches: Matcher;
}

export type WatchListener = (type: WatchEventType, object: KubeObj) => void;

interface Subscriber {
  resource: string;
  filter: WatchFilter;
  listener: WatchListener;
}

export interface DeleteOptions {
  /** Pods bound to a node wait for the kubelet unless this is 0 (default: spec.terminationGracePeriodSeconds ?? 30). */
  gracePeriodSeconds?: number;
}

const clone = <T>(o: T): T => structuredClone(o);

export class TestStore {
  readonly defs: readonly ResourceDef[];
  private rv = 1;
  private compactedRV = 0;
  private readonly objects = new Map<string, Map<string, KubeObj>>();
  private history: StoredEvent[] = [];
  private readonly subscribers = new Set<Subscriber>();

  constructor(defs: readonly ResourceDef[]) {
    this.defs = defs;
    for (const d of defs) this.objects.set(d.id, new Map());
  }

  /** The current (latest) resourceVersion. */
  resourceVersion(): number {
    return this.rv;
  }

  /** Resolve `pods`, `csidrivers`, `csidrivers.storage.k8s.io`, ... to a resource definition. */
  def(resource: string): ResourceDef {
    const d = this.defs.find((x) => x.id === resource) ?? this.defs.find((x) => x.plural === resource);
    if (!d) throw new Error(`test API server: unknown resource ${JSON.stringify(resource)}`);
    return d;
  }

  private qualified(d: ResourceDef): string {
    return d.group === '' ? d.plural : `${d.plural}.${d.group}`;
  }

  /** The objects of one resource (every resource has its map from the constructor on). */
  private objectsOf(d: ResourceDef): Map<string, KubeObj> {
    let map = this.objects.get(d.id);
    if (!map) {
      map = new Map();
      this.objects.set(d.id, map);
    }
    return map;
  }

  private key(d: ResourceDef, namespace: string | undefined, name: string): string {
    return d.namespaced ? `${namespace ?? ''}/${name}` : name;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObj | undefined {
    const d = this.def(resource);
    const o = this.objectsOf(d).get(this.key(d, namespace, name));
    return o ? clone(o) : undefined;
  }

  /** Like get, but a NotFound StatusError when missing. */
  mustGet(resource: string, namespace: string | undefined, name: string): KubeObj {
    const o = this.get(resource, namespace, name);
    if (!o) {
      const d = this.def(resource);
      throw notFound(this.qualified(d), name, d.group, d.plural);
    }
    return o;
  }

  list(resource: string, namespace?: string): KubeObj[] {
    const d = this.def(resource);
    const all = [...this.objectsOf(d).values()];
    return all
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .sort((a, b) =>
        this.key(d, a.metadata.namespace, a.metadata.name ?? '') <
        this.key(d, b.metadata.namespace, b.metadata.name ?? '')
          ? -1
          : 1,
      )
      .map(clone);
  }

  create(resource: string, input: KubeObj): KubeObj {
    const d = this.def(resource);
    const obj = clone(input);
    obj.metadata ??= {};
    if (d.id === 'pods') defaultStoredPod(obj, 'create');
    if (!obj.metadata.name && obj.metadata.generateName) {
      obj.metadata.name = obj.metadata.generateName + randomUUID().slice(0, 5);
    }
    const name = obj.metadata.name;
    if (!name) {
      throw new StatusError(
        422,
        `${d.kind} "" is invalid: metadata.name: Required value: name or generateName is required`,
        {
          details: {
            group: d.group,
            kind: d.kind,
            causes: [{ reason: 'FieldValueRequired', field: 'metadata.name' }],
          },
        },
      );
    }
    if (d.namespaced) obj.metadata.namespace ??= 'default';
    else delete obj.metadata.namespace;
    const map = this.objectsOf(d);
    const k = this.key(d, obj.metadata.namespace, name);
    if (map.has(k)) throw alreadyExists(this.qualified(d), name, d.group, d.plural);
    obj.apiVersion = apiVersionOf(d, at(d.versions, 0));
    obj.kind = d.kind;
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    delete obj.metadata.deletionTimestamp;
    obj.metadata.resourceVersion = String(++this.rv);
    map.set(k, obj);
    this.emit({ rv: this.rv, resource: d.id, type: 'ADDED', object: clone(obj) });
    return clone(obj);
  }

  /**
   * Replace an object. A set metadata.resourceVersion must match (optimistic
   * concurrency). With a status subresource, the main resource keeps the old
   * status and `subresource: 'status'` changes only the status.
   */
  update(resource: string, input: KubeObj, opts: { subresource?: string } = {}): KubeObj {
    const d = this.def(resource);
    const name = input.metadata?.name ?? '';
    const map = this.objectsOf(d);
    const k = this.key(d, d.namespaced ? (input.metadata.namespace ?? 'default') : undefined, name);
    const cur = map.get(k);
    if (!cur) throw notFound(this.qualified(d), name, d.group, d.plural);
    const inRV = input.metadata.resourceVersion;
    if (inRV && inRV !== cur.metadata.resourceVersion)
      throw conflict(this.qualified(d), name, d.group, d.plural);
    let next: KubeObj;
    if (opts.subresource === 'status') {
      next = { ...clone(cur), status: clone(input.status) };
    } else {
      next = clone(input);
      if (d.id === 'pods') defaultStoredPod(next, 'update');
      if (d.subresources.includes('status')) next.status = clone(cur.status);
    }
    // Identity and server-owned fields cannot be changed by clients.
    next.apiVersion = cur.apiVersion;
    next.kind = cur.kind;
    next.metadata = {
      ...next.metadata,
      name: cur.metadata.name,
      namespace: cur.metadata.namespace,
      uid: cur.metadata.uid,
      creationTimestamp: cur.metadata.creationTimestamp,
      deletionTimestamp: cur.metadata.deletionTimestamp,
      deletionGracePeriodSeconds: cur.metadata.deletionGracePeriodSeconds,
    };
    if (next.metadata.namespace === undefined) delete next.metadata.namespace;
    if (next.metadata.deletionTimestamp === undefined) delete next.metadata.deletionTimestamp;
    if (next.metadata.deletionGracePeriodSeconds === undefined)
      delete next.metadata.deletionGracePeriodSeconds;
    next.metadata.resourceVersion = String(++this.rv);
    map.set(k, next);
    this.emit({ rv: this.rv, resource: d.id, type: 'MODIFIED', object: clone(next), prev: clone(cur) });
    const finalizers = next.metadata.finalizers as string[] | undefined;
    if (next.metadata.deletionTimestamp && !finalizers?.length && !this.awaitsKubelet(d, next)) {
      return this.remove(d, k, next);
    }
    return clone(next);
  }

  /** A pod bound to a node under graceful deletion stays until deleted again with grace 0. */
  private awaitsKubelet(d: ResourceDef, o: KubeObj): boolean {
    const spec = o.spec as { nodeName?: string } | undefined;
    return d.id === 'pods' && !!spec?.nodeName && Number(o.metadata.deletionGracePeriodSeconds ?? 0) > 0;
  }

  /**
   * Delete like the API server: objects with finalizers, and pods bound to a
   * node with a grace period, only get metadata.deletionTimestamp (MODIFIED);
   * everything else is removed (DELETED). Returns the object as last seen.
   */
  delete(resource: string, namespace: string | undefined, name: string, opts: DeleteOptions = {}): KubeObj {
    const d = this.def(resource);
    const map = this.objectsOf(d);
    const k = this.key(d, namespace, name);
    const cur = map.get(k);
    if (!cur) throw notFound(this.qualified(d), name, d.group, d.plural);
    const finalizers = cur.metadata.finalizers as string[] | undefined;
    let grace = 0;
    if (d.id === 'pods' && (cur.spec as { nodeName?: string } | undefined)?.nodeName) {
      const spec = cur.spec as { terminationGracePeriodSeconds?: number };
      grace = opts.gracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30;
    }
    if (finalizers?.length || grace > 0) {
      const already = cur.metadata.deletionTimestamp !== undefined;
      const prevGrace = Number(cur.metadata.deletionGracePeriodSeconds ?? Number.POSITIVE_INFINITY);
      if (already && !(grace < prevGrace)) return clone(cur);
      const next = clone(cur);
      next.metadata.deletionTimestamp ??= new Date(Date.now() + grace * 1000)
        .toISOString()
        .replace(/\.\d+Z$/, 'Z');
      next.metadata.deletionGracePeriodSeconds = grace;
      if (grace === 0 && !finalizers?.length) return this.remove(d, k, cur);
      next.metadata.resourceVersion = String(++this.rv);
      map.set(k, next);
      this.emit({ rv: this.rv, resource: d.id, type: 'MODIFIED', object: clone(next), prev: clone(cur) });
      return clone(next);
    }
    return this.remove(d, k, cur);
  }

  /** Removes `cur`, the object stored under `k`. */
  private remove(d: ResourceDef, k: string, cur: KubeObj): KubeObj {
    this.objectsOf(d).delete(k);
    const gone = clone(cur);
    gone.metadata.resourceVersion = String(++this.rv);
    this.emit({ rv: this.rv, resource: d.id, type: 'DELETED', object: clone(gone) });
    return gone;
  }

  /** Every resourceVersion handed out so far becomes too old (410 Gone) for list and watch. */
  compact(): void {
    this.rv++;
    this.compactedRV = this.rv;
    this.history = [];
  }

  /** Throws 410 Gone when `rv` is older than the compaction point. */
  checkNotCompacted(rv: number): void {
    if (rv < this.compactedRV) throw tooOld(rv, this.compactedRV);
  }

  /**
   * Start a watch: replays the history after `fromRV` (or, when undefined,
   * synthetic ADDED events for the current objects) and then live events.
   * Throws 410 Gone for a compacted `fromRV`.
   */
  watch(
    resource: string,
    fromRV: number | undefined,
    filter: WatchFilter,
    listener: WatchListener,
  ): () => void {
    const d = this.def(resource);
    if (fromRV !== undefined) this.checkNotCompacted(fromRV);
    const sub: Subscriber = { resource: d.id, filter, listener };
    if (fromRV === undefined) {
      for (const o of this.list(d.id, filter.namespace)) if (filter.matches(o)) listener('ADDED', o);
    } else {
      for (const ev of this.history) if (ev.rv > fromRV) this.deliver(sub, ev);
    }
    this.subscribers.add(sub);
    return () => this.subscribers.delete(sub);
  }

  private emit(ev: StoredEvent): void {
    this.history.push(ev);
    for (const sub of this.subscribers) this.deliver(sub, ev);
  }

  private deliver(sub: Subscriber, ev: StoredEvent): void {
    if (sub.resource !== ev.resource) return;
    const inNs = (o: KubeObj) =>
      sub.filter.namespace === undefined || o.metadata.namespace === sub.filter.namespace;
    if (!inNs(ev.object)) return;
    const now = sub.filter.matches(ev.object);
    if (ev.type !== 'MODIFIED') {
      if (now) sub.listener(ev.type, clone(ev.object));
      return;
    }
    // A selector watch sees an object enter or leave its selection as ADDED / DELETED.
    const before = ev.prev ? sub.filter.matches(ev.prev) : false;
    if (before && now) sub.listener('MODIFIED', clone(ev.object));
    else if (!before && now) sub.listener('ADDED', clone(ev.object));
    else if (before && !now) sub.listener('DELETED', clone(ev.object));
  }
}
