// kubelet's watch-based Secret/ConfigMap managers
// (pkg/kubelet/util/manager/watch_based_manager.go): one list+watch per
// referenced object (fieldSelector metadata.name=<name> in its namespace),
// reference-counted by the pods that use it and dropped with the last one.
// Immutable objects stop being watched once seen, as in kubelet.

import { CoreV1Api, type V1ConfigMap, type V1Secret } from '@kubernetes/client-node';
import { ApiError } from '../errors.ts';
import {
  type InformerOptions,
  informerTuning,
  type KubeList,
  type ListOptions,
  Reflector,
} from './reflector.ts';
import type { KubeObject } from './store.ts';

interface Cacheable extends KubeObject {
  immutable?: boolean;
}

export interface ObjectCacheOptions extends InformerOptions {
  /** How long get() waits for a freshly registered object's first list (kubelet: 1 s). */
  syncTimeoutMs?: number;
}

interface Entry<T extends KubeObject> {
  pods: Set<string>;
  reflector: Reflector<T>;
  unsubscribe: () => void;
}

type Kind = 'secret' | 'configmap';

/** Lists the objects of one kind in a namespace (the factories below give the typed call). */
type ListNamespaced<T> = (core: CoreV1Api, namespace: string, o: ListOptions) => Promise<KubeList<T>>;

export class ObjectCache<T extends Cacheable> {
  private readonly kind: Kind;
  private readonly listNamespaced: ListNamespaced<T>;
  private readonly opts: ObjectCacheOptions;
  private readonly core: CoreV1Api;
  private readonly entries = new Map<string, Entry<T>>();
  private readonly listeners = new Set<(namespace: string, name: string) => void>();

  constructor(kind: Kind, listNamespaced: ListNamespaced<T>, opts: ObjectCacheOptions) {
    this.kind = kind;
    this.listNamespaced = listNamespaced;
    this.opts = opts;
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** Adds `podUID` as a user of namespace/name; the first user starts its watch. */
  register(namespace: string, name: string, podUID: string): void {
    const key = `${namespace}/${name}`;
    const existing = this.entries.get(key);
    if (existing) {
      existing.pods.add(podUID);
      return;
    }
    const reflector = this.newReflector(namespace, name);
    const unsubscribe = reflector.onEvent((e) => {
      // An immutable object can never change again: stop watching it (kubelet does the same).
      if (e.type !== 'DELETED' && e.object.immutable === true) void reflector.stop();
      for (const l of [...this.listeners]) l(namespace, name);
    });
    this.entries.set(key, { pods: new Set([podUID]), reflector, unsubscribe });
    void reflector.start();
  }

  /** Removes `podUID` as a user; the last one stops the watch and drops the object. */
  unregister(namespace: string, name: string, podUID: string): void {
    const key = `${namespace}/${name}`;
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.pods.delete(podUID);
    if (entry.pods.size > 0) return;
    this.entries.delete(key);
    entry.unsubscribe();
    void entry.reflector.stop();
  }

  /** Whether namespace/name is registered by any pod. */
  isRegistered(namespace: string, name: string): boolean {
    return this.entries.has(`${namespace}/${name}`);
  }

  /** Number of objects currently watched. */
  size(): number {
    return this.entries.size;
  }

  /**
   * The cached object. Errors, as kubelet's: `object "ns"/"name" not
   * registered`; `failed to sync secret cache: ...` when the first list has not
   * succeeded within syncTimeoutMs; `secret "name" not found`.
   */
  async get(namespace: string, name: string): Promise<T> {
    const entry = this.entries.get(`${namespace}/${name}`);
    if (!entry) throw new ApiError('NotRegistered', `object "${namespace}"/"${name}" not registered`);
    const r = entry.reflector;
    if (!(await r.waitForSync(this.opts.syncTimeoutMs ?? 1000))) {
      const cause = r.lastError?.message ?? 'timed out waiting for the condition';
      // A list the server refused is a refusal, not a slow cache.
      const reason = r.lastError?.reason === 'Forbidden' ? 'Forbidden' : 'NotSynced';
      throw new ApiError(reason, `failed to sync ${this.kind} cache: ${cause}`, { code: r.lastError?.code });
    }
    const obj = r.get(name);
    if (!obj) throw new ApiError('NotFound', `${this.kind} "${name}" not found`, { code: 404 });
    return obj;
  }

  /** Called with namespace/name whenever a registered object is added, changed or deleted. */
  onChange(listener: (namespace: string, name: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async stop(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(
      all.map((e) => {
        e.unsubscribe();
        return e.reflector.stop();
      }),
    );
  }

  private newReflector(namespace: string, name: string): Reflector<T> {
    const fieldSelector = `metadata.name=${name}`;
    const plural = this.kind === 'secret' ? 'secrets' : 'configmaps';
    const list = (o: ListOptions) => this.listNamespaced(this.core, namespace, o);
    return new Reflector<T>({
      ...informerTuning(this.opts),
      name: `${this.kind} ${namespace}/${name}`,
      watchPath: `/api/v1/namespaces/${encodeURIComponent(namespace)}/${plural}`,
      list,
      fieldSelector,
      // One object per reflector; key by name so get(name) is direct.
      keyOf: (o) => o.metadata?.name ?? '',
    });
  }
}

export function newSecretCache(opts: ObjectCacheOptions): ObjectCache<V1Secret> {
  return new ObjectCache<V1Secret>(
    'secret',
    (core, namespace, o) => core.listNamespacedSecret({ namespace, ...o }),
    opts,
  );
}

export function newConfigMapCache(opts: ObjectCacheOptions): ObjectCache<V1ConfigMap> {
  return new ObjectCache<V1ConfigMap>(
    'configmap',
    (core, namespace, o) => core.listNamespacedConfigMap({ namespace, ...o }),
    opts,
  );
}
