// CSIDriver (storage.k8s.io/v1) informer: kubelet starts one inside the volume
// manager and the CSI plugin reads podInfoOnMount, tokenRequests,
// fsGroupPolicy, ... from its lister.

import { StorageV1Api, type V1CSIDriver } from '@kubernetes/client-node';
import type { CSIDriverLister } from '../types.ts';
import { type InformerOptions, informerTuning, Reflector, ReflectorInformer } from './reflector.ts';

export type CSIDriverInformerOptions = InformerOptions;

export class CSIDriverInformer extends ReflectorInformer<V1CSIDriver> implements CSIDriverLister {
  readonly lister: CSIDriverLister;

  constructor(opts: CSIDriverInformerOptions) {
    const storage = opts.kubeConfig.makeApiClient(StorageV1Api);
    super(
      new Reflector<V1CSIDriver>({
        ...informerTuning(opts),
        name: 'csidrivers',
        watchPath: '/apis/storage.k8s.io/v1/csidrivers',
        list: (o) => storage.listCSIDriver(o),
        // CSIDrivers are looked up by driver name, which is the object name.
        keyOf: (d) => d.metadata?.name ?? '',
      }),
    );
    this.lister = { get: (name) => this.get(name), list: () => this.list() };
  }

  get(name: string): V1CSIDriver | undefined {
    return this.reflector.get(name);
  }

  list(): V1CSIDriver[] {
    return this.reflector.list();
  }

  /** Resolves once synced; rejects with kubelet's message if `timeoutMs` (default 30 s) passes first. */
  async waitForCacheSync(timeoutMs = 30_000): Promise<void> {
    if (await this.reflector.waitForSync(timeoutMs)) return;
    const cause = this.reflector.lastError?.message;
    throw new Error(`failed to wait for cache sync for CSIDriverLister${cause ? `: ${cause}` : ''}`);
  }
}
