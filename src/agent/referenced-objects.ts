// The secrets, configMaps and claims a pod's volumes reference. Its own module
// (no @kubernetes/client-node values) so that standalone mode, which never
// loads the Kubernetes client, can use it too.
import type { V1Pod } from '@kubernetes/client-node';
import { claimNameOf } from './volumemanager/claims.ts';

/** The secrets and configMaps a pod's volumes reference, as "namespace/name". */
export function referencedObjects(pod: V1Pod): {
  secrets: Set<string>;
  configMaps: Set<string>;
  claims: Set<string>;
} {
  const ns = pod.metadata?.namespace ?? 'default';
  const secrets = new Set<string>();
  const configMaps = new Set<string>();
  const claims = new Set<string>();
  for (const v of pod.spec?.volumes ?? []) {
    const claim = v ? claimNameOf(pod, v) : undefined;
    if (claim) claims.add(`${ns}/${claim}`);
    if (v.secret?.secretName) secrets.add(`${ns}/${v.secret.secretName}`);
    if (v.configMap?.name) configMaps.add(`${ns}/${v.configMap.name}`);
    for (const s of v.projected?.sources ?? []) {
      if (s.secret?.name) secrets.add(`${ns}/${s.secret.name}`);
      if (s.configMap?.name) configMaps.add(`${ns}/${s.configMap.name}`);
    }
  }
  return { secrets, configMaps, claims };
}
