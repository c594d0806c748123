// The test API server's store seen through the API types: each resource a test
// reads or writes is keyed to its @kubernetes/client-node type, so a test says
// `store.get('nodes', undefined, 'testnode')?.status?.volumesInUse` instead of
// casting what TestStore (which holds untyped JSON, as etcd does) returns.
// Add a resource here when a test needs it.
import type {
  CoreV1Event,
  V1CSIDriver,
  V1CSINode,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1VolumeAttachment,
} from '@kubernetes/client-node';
import type { DeleteOptions, KubeObj, TestStore } from './store.ts';

/** Store resource id (see resources.ts) → the type of its objects. */
export interface Kinds {
  pods: V1Pod;
  nodes: V1Node;
  persistentvolumeclaims: V1PersistentVolumeClaim;
  persistentvolumes: V1PersistentVolume;
  events: CoreV1Event;
  'csidrivers.storage.k8s.io': V1CSIDriver;
  'csinodes.storage.k8s.io': V1CSINode;
  'volumeattachments.storage.k8s.io': V1VolumeAttachment;
}

export type Kind = keyof Kinds;

export interface TypedStore {
  get<K extends Kind>(kind: K, namespace: string | undefined, name: string): Kinds[K] | undefined;
  /** Like get, but a NotFound StatusError when missing. */
  mustGet<K extends Kind>(kind: K, namespace: string | undefined, name: string): Kinds[K];
  list<K extends Kind>(kind: K, namespace?: string): Kinds[K][];
  create<K extends Kind>(kind: K, object: Kinds[K]): Kinds[K];
  /** See TestStore.update: `subresource: 'status'` changes only the status. */
  update<K extends Kind>(kind: K, object: Kinds[K], opts?: { subresource?: string }): Kinds[K];
  delete<K extends Kind>(
    kind: K,
    namespace: string | undefined,
    name: string,
    opts?: DeleteOptions,
  ): Kinds[K];
}

/**
 * The two conversions between the store's JSON and the API types: the one
 * place that trusts the kind map (a resource's objects are what the API
 * server would serve for it). Dates in the types are strings in the store,
 * as on the wire; tests compare them as they come.
 */
const fromStore = <K extends Kind>(o: KubeObj): Kinds[K] => o as unknown as Kinds[K];
const toStore = <K extends Kind>(o: Kinds[K]): KubeObj => ({ ...o, metadata: { ...o.metadata } }) as KubeObj;

export function typedStore(store: TestStore): TypedStore {
  return {
    get(kind, namespace, name) {
      const o = store.get(kind, namespace, name);
      return o === undefined ? undefined : fromStore(o);
    },
    mustGet: (kind, namespace, name) => fromStore(store.mustGet(kind, namespace, name)),
    list: (kind, namespace) => store.list(kind, namespace).map((o) => fromStore(o)),
    create: (kind, object) => fromStore(store.create(kind, toStore(object))),
    update: (kind, object, opts) => fromStore(store.update(kind, toStore(object), opts)),
    delete: (kind, namespace, name, opts) => fromStore(store.delete(kind, namespace, name, opts)),
  };
}
