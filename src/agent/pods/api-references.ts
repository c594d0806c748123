// Static pods may not reference API objects in cluster mode. The API server
// refuses a mirror pod that does (the NodeRestriction admission plugin, and
// ServiceAccount admission for token projections), and the Node authorizer
// lets a node read only objects referenced by pods bound to it through the
// API. A static pod naming a secret is therefore a way for whoever can drop a
// file on the node to make podvol fetch, with its own credentials, an object
// no pod of this node was given: podvol refuses the pod, reason
// StaticPodAPIReference, with the words the API server would use.

import type { V1Container, V1EnvFromSource, V1EnvVar, V1Pod, V1Volume } from '@kubernetes/client-node';
import type { SourceReason } from '../../reasons.ts';

export const STATIC_POD_API_REFERENCE = 'StaticPodAPIReference' satisfies SourceReason;

type Visit = (name: string, where: string) => void;

function containers(pod: V1Pod): { kind: string; c: V1Container }[] {
  const s = pod.spec;
  return [
    ...(s?.initContainers ?? []).map((c) => ({ kind: 'initContainers', c })),
    ...(s?.containers ?? []).map((c) => ({ kind: 'containers', c })),
    ...(s?.ephemeralContainers ?? []).map((c) => ({ kind: 'ephemeralContainers', c })),
  ];
}

/** The objects of one kind every container's envFrom and env name (`fromName`, `keyRefName` pick them). */
function visitContainerEnv(
  pod: V1Pod,
  visit: Visit,
  fromName: (e: V1EnvFromSource) => string | undefined,
  keyRefName: (e: V1EnvVar) => string | undefined,
): void {
  for (const { kind, c } of containers(pod)) {
    const at = `${kind}[${JSON.stringify(c.name)}]`;
    for (const e of c.envFrom ?? []) {
      const name = fromName(e);
      if (name) visit(name, `${at}.envFrom`);
    }
    for (const e of c.env ?? []) {
      const name = keyRefName(e);
      if (name) visit(name, `${at}.env[${JSON.stringify(e.name)}]`);
    }
  }
}

/** Every secret a pod names, as podutil.VisitPodSecretNames walks them. */
function visitSecrets(pod: V1Pod, visit: Visit): void {
  for (const r of pod.spec?.imagePullSecrets ?? []) if (r.name) visit(r.name, 'imagePullSecrets');
  visitContainerEnv(
    pod,
    visit,
    (e) => e.secretRef?.name,
    (e) => e.valueFrom?.secretKeyRef?.name,
  );
  for (const v of pod.spec?.volumes ?? []) {
    const at = `volume ${JSON.stringify(v.name)}`;
    const refs: (string | undefined)[] = [
      v.secret?.secretName,
      v.azureFile?.secretName,
      v.cephfs?.secretRef?.name,
      v.cinder?.secretRef?.name,
      v.flexVolume?.secretRef?.name,
      v.rbd?.secretRef?.name,
      v.scaleIO?.secretRef?.name,
      v.iscsi?.secretRef?.name,
      v.storageos?.secretRef?.name,
      v.csi?.nodePublishSecretRef?.name,
      ...(v.projected?.sources ?? []).map((s) => s.secret?.name),
    ];
    for (const r of refs) if (r) visit(r, at);
  }
}

/** Every configMap a pod names, as podutil.VisitPodConfigmapNames walks them. */
function visitConfigMaps(pod: V1Pod, visit: Visit): void {
  visitContainerEnv(
    pod,
    visit,
    (e) => e.configMapRef?.name,
    (e) => e.valueFrom?.configMapKeyRef?.name,
  );
  for (const v of pod.spec?.volumes ?? []) {
    const at = `volume ${JSON.stringify(v.name)}`;
    if (v.configMap?.name) visit(v.configMap.name, at);
    for (const s of v.projected?.sources ?? []) if (s.configMap?.name) visit(s.configMap.name, at);
  }
}

const volumesWith = (pod: V1Pod, has: (v: V1Volume) => boolean) =>
  (pod.spec?.volumes ?? []).filter(has).map((v) => JSON.stringify(v.name));

/**
 * Why a static pod may not run in cluster mode, in the API server's words
 * (the first rule that applies, in its order), or undefined when it references
 * no API object.
 */
export function staticPodAPIReference(pod: V1Pod, nodeName: string): string | undefined {
  const node = `node ${JSON.stringify(nodeName)}`;
  if (pod.spec?.serviceAccountName)
    return `${node} can not create pods that reference a service account (serviceAccountName ${JSON.stringify(pod.spec.serviceAccountName)})`;
  const found = (kind: string, visitor: (pod: V1Pod, visit: Visit) => void) => {
    const seen: string[] = [];
    visitor(pod, (name, where) => seen.push(`${where}: ${kind} ${JSON.stringify(name)}`));
    return seen;
  };
  const secrets = found('secret', visitSecrets);
  if (secrets.length > 0) return `${node} can not create pods that reference secrets (${secrets.join(', ')})`;
  const configMaps = found('configMap', visitConfigMaps);
  if (configMaps.length > 0)
    return `${node} can not create pods that reference configmaps (${configMaps.join(', ')})`;
  const bundles = volumesWith(pod, (v) => (v.projected?.sources ?? []).some((s) => s.clusterTrustBundle));
  if (bundles.length > 0)
    return `${node} can not create pods that reference clustertrustbundles (volume ${bundles.join(', ')})`;
  const claims = volumesWith(pod, (v) => Boolean(v.persistentVolumeClaim));
  if (claims.length > 0)
    return `${node} can not create pods that reference persistentvolumeclaims (volume ${claims.join(', ')})`;
  // ServiceAccount admission: "a mirror pod may not use ServiceAccountToken volume projections".
  const tokens = volumesWith(pod, (v) => (v.projected?.sources ?? []).some((s) => s.serviceAccountToken));
  if (tokens.length > 0)
    return `a mirror pod may not use ServiceAccountToken volume projections (volume ${tokens.join(', ')})`;
  const ephemeral = volumesWith(pod, (v) => Boolean(v.ephemeral));
  if (ephemeral.length > 0)
    return `${node} can not create pods that use generic ephemeral volumes (volume ${ephemeral.join(', ')})`;
  return undefined;
}
