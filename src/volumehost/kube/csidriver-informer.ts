// CSIDriver (storage.k8s.io/v1) informer: kubelet starts one inside the volume
// manager and the CSI plugin reads podInfoOnMount, tokenRequests,
// fsGroupPolicy, ... from its lister.

import { type KubeConfig, StorageV1Api, type V1CSIDriver } from '@kubernetes/client-node';
import type { Logger } from '../../logger.ts';
import type { CSIDriverLister } from '../types.ts';
import { Reflector } from './reflector.ts';

export interface CSIDriverInformerOptions {
  kubeConfig: KubeConfig;
  logger?: Logger;
  watchTimeoutSeconds?: number;
  watchdogGraceMs?: number;
  backoff?: { initialMs?: number; maxMs?: number };
}

export class CSIDriverInformer implements CSIDriverLister {
  /** The reflector, for metrics (lastSyncTime, watchRestarts, lastError). */
  readonly reflector: Reflector<V1CSIDriver>;
  readonly lister: CSIDriverLister;

  constructor(opts: CSIDriverInformerOptions) {
    const storage = opts.kubeConfig.makeApiClient(StorageV1Api);
    this.reflector = new Reflector<V1CSIDriver>({
      name: 'csidrivers',
      kubeConfig: opts.kubeConfig,
      watchPath: '/apis/storage.k8s.io/v1/csidrivers',
      list: (o) => storage.listCSIDriver(o),
      // CSIDrivers are looked up by driver name, which is the object name.
      keyOf: (d) => d.metadata?.name ?? '',
      watchTimeoutSeconds: opts.watchTimeoutSeconds,
      watchdogGraceMs: opts.watchdogGraceMs,
      backoff: opts.backoff,
      logger: opts.logger,
    });
    this.lister = { get: (name) => this.get(name), list: () => this.list() };
  }

  start(): Promise<void> {
    return this.reflector.start();
  }

  stop(): Promise<void> {
    return this.reflector.stop();
  }

  get(name: string): V1CSIDriver | undefined {
    return this.reflector.get(name);
  }

  list(): V1CSIDriver[] {
    return this.reflector.list();
  }

  hasSynced(): boolean {
    return this.reflector.hasSynced();
  }

  /** Resolves once synced; rejects with kubelet's message if `timeoutMs` (default 30 s) passes first. */
  async waitForCacheSync(timeoutMs = 30_000): Promise<void> {
    if (await this.reflector.waitForSync(timeoutMs)) return;
    const cause = this.reflector.lastError?.message;
    throw new Error(`failed to wait for cache sync for CSIDriverLister${cause ? `: ${cause}` : ''}`);
  }
}
