// Pods bound to this node, from the API server: one list+watch of
// /api/v1/pods with fieldSelector spec.nodeName=<node> (the only pod query a
// node identity may make under AuthorizeNodeWithSelectors), keyed by UID.

import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import {
  type InformerOptions,
  informerTuning,
  Reflector,
  ReflectorInformer,
} from '../../volumehost/kube/reflector.ts';
import type { PodSource, PodSourceStats, SourceError } from './types.ts';

export interface ApiPodSourceOptions extends InformerOptions {
  nodeName: string;
}

/** Succeeded/Failed pods have nothing left running: their volumes are torn down like deleted pods'. */
export function isTerminal(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

export class ApiPodSource extends ReflectorInformer<V1Pod> implements PodSource {
  readonly name = 'api';

  constructor(opts: ApiPodSourceOptions) {
    if (!opts.nodeName) throw new Error('api pod source: a node name is required');
    const core = opts.kubeConfig.makeApiClient(CoreV1Api);
    const fieldSelector = `spec.nodeName=${opts.nodeName}`;
    super(
      new Reflector<V1Pod>({
        ...informerTuning(opts),
        name: `pods on node ${opts.nodeName}`,
        watchPath: '/api/v1/pods',
        list: (o) => core.listPodForAllNamespaces(o),
        fieldSelector,
        keyOf: (p) => p.metadata?.uid ?? '',
      }),
    );
  }

  stats(): PodSourceStats {
    const t = this.reflector.lastSyncTime;
    return {
      lastSyncSeconds: t ? t.getTime() / 1000 : undefined,
      watchRestarts: { pods: this.reflector.watchRestarts },
    };
  }

  pods(): V1Pod[] {
    return this.reflector.list().filter((p) => !isTerminal(p));
  }

  /** The last list/watch failure, while it lasts. */
  errors(): SourceError[] {
    const e = this.reflector.lastError;
    return e ? [{ source: this.name, reason: e.reason, message: e.message }] : [];
  }
}
