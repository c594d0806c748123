// Pods for tests: static pod manifests for end-to-end tests (the smallest valid
// Pod whose one container mounts each volume, so that podvol sets every volume
// up), pods as the API server returns them, and typed pods for unit tests.
import type { V1ObjectMeta, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { must } from './must.ts';

export interface VolumeSpec {
  name: string;
  [source: string]: unknown;
}

/**
 * A Pod named `name` with `volumes`, its container `c` mounting each of them
 * (and each of `extraMounts`, names that need not be volumes) at /m/<name>.
 */
export function staticPod(name: string, volumes: VolumeSpec[], extraMounts: string[] = []) {
  const mounted = [...new Set([...volumes.map((v) => v.name), ...extraMounts])];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      containers: [
        { name: 'c', image: 'i', volumeMounts: mounted.map((n) => ({ name: n, mountPath: `/m/${n}` })) },
      ],
      volumes,
    },
  };
}

/**
 * A pod as the API server returns it (defaulted, Running), in namespace
 * default with the default service account, bound to `nodeName`.
 */
export function apiPod(
  name: string,
  nodeName: string,
  spec: { containers: Record<string, unknown>[]; volumes: VolumeSpec[] },
  labels?: Record<string, string>,
) {
  return {
    metadata: { name, namespace: 'default', ...(labels ? { labels } : {}) },
    spec: { nodeName, serviceAccountName: 'default', ...spec },
    status: { phase: 'Running' },
  };
}

/** The kube-api-access volume ServiceAccount admission adds to a pod, as the API server stores it (defaulted). */
export function kubeApiAccessVolume(): VolumeSpec {
  return {
    name: 'kube-api-access',
    projected: {
      defaultMode: 0o644,
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  };
}

/**
 * A pod whose one container `app` mounts every volume at /<name>, with `extra`
 * in its spec: pod `web` of namespace `shop` (uid uid-1, label app=web) unless
 * `metadata` names another.
 */
export function podWith(
  volumes: V1Volume[] | undefined,
  extra: Partial<V1PodSpec> = {},
  metadata: V1ObjectMeta = { name: 'web', namespace: 'shop', uid: 'uid-1', labels: { app: 'web' } },
): V1Pod {
  return {
    metadata,
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: (volumes ?? []).map((v) => ({ name: v.name, mountPath: `/${v.name}` })),
        },
      ],
      volumes,
      ...extra,
    },
  };
}

/** A pod's uid, asserted to be there. */
export const uidOf = (pod: { metadata?: { uid?: string } }): string => must(pod.metadata?.uid, 'the pod uid');
