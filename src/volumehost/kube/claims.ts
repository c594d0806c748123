// PersistentVolumeClaims and PersistentVolumes for the desired-state
// populator, each through its own watch (fieldSelector metadata.name=<name>),
// as secrets and configMaps are: a claim is watched while a pod refers to it,
// and the volume a watched claim is bound to is watched while the claim is.
// Lookups are synchronous snapshots; onChange says when to look again.
import { CoreV1Api, type V1PersistentVolume, type V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { type InformerOptions, informerTuning, type ListOptions, Reflector } from './reflector.ts';
import type { KubeObject } from './store.ts';

/** A synchronous snapshot of one watched object. */
export interface Peek<T> {
  synced: boolean;
  object?: T;
  /** The last list/watch failure, when not synced. */
  error?: string;
}

/** What the desired-state populator reads claims through (src/agent/volumemanager/claims.ts). */
export interface ClaimLookup {
  claim(namespace: string, name: string): Peek<V1PersistentVolumeClaim>;
  volume(name: string): Peek<V1PersistentVolume>;
}

export type ClaimWatchOptions = InformerOptions;

interface Watched<T extends KubeObject> {
  owners: Set<string>;
  reflector: Reflector<T>;
  off: () => void;
}

export class ClaimWatches implements ClaimLookup {
  readonly #o: ClaimWatchOptions;
  readonly #core: CoreV1Api;
  readonly #claims = new Map<string, Watched<V1PersistentVolumeClaim>>();
  readonly #volumes = new Map<string, Watched<V1PersistentVolume>>();
  /** claim key → the volume name it was last seen bound to (and registered for). */
  readonly #boundTo = new Map<string, string>();
  readonly #listeners = new Set<() => void>();

  constructor(o: ClaimWatchOptions) {
    this.#o = o;
    this.#core = o.kubeConfig.makeApiClient(CoreV1Api);
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(): void {
    for (const l of [...this.#listeners]) l();
  }

  /** `owner` (a pod UID) uses claim namespace/name. */
  registerClaim(namespace: string, name: string, owner: string): void {
    const key = `${namespace}/${name}`;
    addOwner(
      this.#claims,
      key,
      owner,
      () =>
        new Reflector<V1PersistentVolumeClaim>({
          ...informerTuning(this.#o),
          name: `persistentvolumeclaim ${key}`,
          watchPath: `/api/v1/namespaces/${encodeURIComponent(namespace)}/persistentvolumeclaims`,
          list: (opts: ListOptions) => this.#core.listNamespacedPersistentVolumeClaim({ namespace, ...opts }),
          fieldSelector: `metadata.name=${name}`,
          keyOf: (o) => o.metadata?.name ?? '',
        }),
      (reflector) => {
        this.#followBinding(key, reflector.get(name)?.spec?.volumeName);
        this.#emit();
      },
    );
  }

  unregisterClaim(namespace: string, name: string, owner: string): void {
    const key = `${namespace}/${name}`;
    if (removeOwner(this.#claims, key, owner)) this.#followBinding(key, undefined);
  }

  #followBinding(claimKey: string, volumeName: string | undefined): void {
    const before = this.#boundTo.get(claimKey);
    if (before === volumeName) return;
    if (before) this.#unregisterVolume(before, claimKey);
    if (volumeName) {
      this.#boundTo.set(claimKey, volumeName);
      this.#registerVolume(volumeName, claimKey);
    } else {
      this.#boundTo.delete(claimKey);
    }
  }

  #registerVolume(name: string, owner: string): void {
    addOwner(
      this.#volumes,
      name,
      owner,
      () =>
        new Reflector<V1PersistentVolume>({
          ...informerTuning(this.#o),
          name: `persistentvolume ${name}`,
          watchPath: '/api/v1/persistentvolumes',
          list: (opts: ListOptions) => this.#core.listPersistentVolume(opts),
          fieldSelector: `metadata.name=${name}`,
          keyOf: (o) => o.metadata?.name ?? '',
        }),
      () => this.#emit(),
    );
  }

  #unregisterVolume(name: string, owner: string): void {
    removeOwner(this.#volumes, name, owner);
  }

  claim(namespace: string, name: string): Peek<V1PersistentVolumeClaim> {
    return peek(this.#claims.get(`${namespace}/${name}`), name);
  }

  volume(name: string): Peek<V1PersistentVolume> {
    return peek(this.#volumes.get(name), name);
  }

  async stop(): Promise<void> {
    const all = [...this.#claims.values(), ...this.#volumes.values()];
    this.#claims.clear();
    this.#volumes.clear();
    await Promise.all(
      all.map((w) => {
        w.off();
        return w.reflector.stop();
      }),
    );
  }
}

/**
 * Adds `owner` to the watch `key`; the first owner creates and starts its
 * reflector, and `changed` runs on every change and once the first list is in.
 */
function addOwner<T extends KubeObject>(
  watches: Map<string, Watched<T>>,
  key: string,
  owner: string,
  make: () => Reflector<T>,
  changed: (reflector: Reflector<T>) => void,
): void {
  const have = watches.get(key);
  if (have) {
    have.owners.add(owner);
    return;
  }
  const reflector = make();
  const off = reflector.onChange(() => changed(reflector));
  watches.set(key, { owners: new Set([owner]), reflector, off });
  // Not for a reflector removed (or replaced) meanwhile: it would register watches nothing removes.
  void reflector.start().then(() => {
    if (watches.get(key)?.reflector === reflector) changed(reflector);
  });
}

/** Removes `owner` from the watch `key`; the last owner stops it (and true is returned). */
function removeOwner<T extends KubeObject>(
  watches: Map<string, Watched<T>>,
  key: string,
  owner: string,
): boolean {
  const w = watches.get(key);
  if (!w) return false;
  w.owners.delete(owner);
  if (w.owners.size > 0) return false;
  watches.delete(key);
  w.off();
  void w.reflector.stop();
  return true;
}

function peek<T extends KubeObject>(w: Watched<T> | undefined, name: string): Peek<T> {
  if (!w) return { synced: false, error: 'not watched yet' };
  const r = w.reflector;
  if (!r.hasSynced()) return { synced: false, error: r.lastError?.message };
  return { synced: true, object: r.get(name) };
}
