// Pods bound to this node, from the API server: one list+watch of
// /api/v1/pods with fieldSelector spec.nodeName=<node> (the only pod query a
// node identity may make under AuthorizeNodeWithSelectors), keyed by UID.

import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../logger.ts';
import { Reflector } from '../../volumehost/kube/reflector.ts';
import type { PodSource, PodSourceStats, SourceError } from './types.ts';

export interface ApiPodSourceOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  logger?: Logger;
  /** Reflector tuning, mostly for tests. */
  watchTimeoutSeconds?: number;
  watchdogGraceMs?: number;
  backoff?: { initialMs?: number; maxMs?: number };
  /** The reflector's time, timers and jitter (default the system's). */
  clock?: Clock;
}

/** Succeeded/Failed pods have nothing left running: their volumes are torn down like deleted pods'. */
export function isTerminal(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

export class ApiPodSource implements PodSource {
  readonly name = 'api';
  private readonly reflector: Reflector<V1Pod>;

  constructor(opts: ApiPodSourceOptions) {
    if (!opts.nodeName) throw new Error('api pod source: a node name is required');
    const core = opts.kubeConfig.makeApiClient(CoreV1Api);
    const fieldSelector = `spec.nodeName=${opts.nodeName}`;
    this.reflector = new Reflector<V1Pod>({
      name: `pods on node ${opts.nodeName}`,
      kubeConfig: opts.kubeConfig,
      watchPath: '/api/v1/pods',
      list: (o) => core.listPodForAllNamespaces(o),
      fieldSelector,
      keyOf: (p) => p.metadata?.uid ?? '',
      watchTimeoutSeconds: opts.watchTimeoutSeconds,
      watchdogGraceMs: opts.watchdogGraceMs,
      backoff: opts.backoff,
      logger: opts.logger,
      clock: opts.clock,
    });
  }

  stats(): PodSourceStats {
    const t = this.reflector.lastSyncTime;
    return {
      lastSyncSeconds: t ? t.getTime() / 1000 : undefined,
      watchRestarts: { pods: this.reflector.watchRestarts },
    };
  }

  start(): Promise<void> {
    return this.reflector.start();
  }

  stop(): Promise<void> {
    return this.reflector.stop();
  }

  hasSynced(): boolean {
    return this.reflector.hasSynced();
  }

  pods(): V1Pod[] {
    return this.reflector.list().filter((p) => !isTerminal(p));
  }

  /** The last list/watch failure, while it lasts. */
  errors(): SourceError[] {
    const e = this.reflector.lastError;
    return e ? [{ source: this.name, reason: e.reason, message: e.message }] : [];
  }

  onChange(listener: () => void): () => void {
    return this.reflector.onChange(listener);
  }
}
