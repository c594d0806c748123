// kubernetes.io/projected: secret, configMap, downwardAPI, serviceAccountToken
// and clusterTrustBundle sources merged into one tmpfs-backed volume. Errors
// of all sources are collected; any one fails the SetUp, as in kubelet.
import type { V1Pod, V1ProjectedVolumeSource } from '@kubernetes/client-node';
import { errorMessage } from '../errno.ts';
import { ApiError } from '../volumehost/errors.ts';
import type { VolumeHost } from '../volumehost/types.ts';
import { type MounterArgs, reasonOf, VolumeError, type VolumePlugin } from '../volumehost/volume.ts';
import { configMapFiles, requireMode, secretFiles } from './payload.ts';
import type { FileProjection } from './util/atomic-writer.ts';
import { collectDownwardAPIData } from './util/fieldpath.ts';
import { wrappedVolumePlugin } from './wrapped-volume.ts';

export const projectedPluginName = 'kubernetes.io/projected';

/**
 * kubelet refuses every projected volume when it has no API client; podvol
 * only fails the sources that need the API, so a projected downwardAPI works
 * in standalone mode too.
 */
export async function collectProjectedData(
  host: VolumeHost,
  pod: V1Pod,
  source: V1ProjectedVolumeSource,
  args: MounterArgs,
): Promise<Map<string, FileProjection>> {
  const defaultMode = requireMode(source.defaultMode);
  const ns = pod.metadata?.namespace ?? 'default';
  const errors: unknown[] = [];
  const payload = new Map<string, FileProjection>();
  const merge = (m: Map<string, FileProjection>) => {
    for (const [k, v] of m) payload.set(k, v);
  };
  // The token file is 0600 when fsUser/fsGroup is set; SetVolumeOwnership then makes it 0640.
  const privateMode = args.fsUser !== undefined || args.fsGroup !== undefined ? 0o600 : defaultMode;

  for (const s of source.sources ?? []) {
    try {
      if (s.secret) {
        merge(await secretFiles(host, ns, { ...s.secret, name: s.secret.name ?? '' }, defaultMode));
      } else if (s.configMap) {
        merge(await configMapFiles(host, ns, { ...s.configMap, name: s.configMap.name ?? '' }, defaultMode));
      } else if (s.downwardAPI) {
        const r = collectDownwardAPIData(
          s.downwardAPI.items ?? [],
          pod,
          host.getNodeAllocatable(),
          defaultMode,
          host.getHostIP(),
        );
        if (r.errors.length > 0) throw new VolumeError('DownwardAPIFieldError', r.errors.join(', '));
        merge(r.payload);
      } else if (s.serviceAccountToken) {
        const tp = s.serviceAccountToken;
        const tr = await host
          .getServiceAccountTokenFunc()(ns, pod.spec?.serviceAccountName || 'default', {
            spec: {
              audiences: tp.audience ? [tp.audience] : [],
              expirationSeconds: tp.expirationSeconds,
              boundObjectRef: {
                apiVersion: 'v1',
                kind: 'Pod',
                name: pod.metadata?.name,
                uid: pod.metadata?.uid,
              },
            },
          })
          .catch((err: unknown) => {
            const msg = errorMessage(err);
            const apiReason = err instanceof ApiError ? err.reason : undefined;
            const reason =
              apiReason === 'Forbidden'
                ? 'TokenRequestForbidden'
                : apiReason === 'StandaloneMode'
                  ? 'StandaloneMode'
                  : 'TokenRequestFailed';
            throw new VolumeError(reason, msg, { cause: err });
          });
        payload.set(tp.path, { data: tr.status?.token ?? '', mode: privateMode, fsUser: args.fsUser });
      } else if (s.clusterTrustBundle) {
        const ctb = s.clusterTrustBundle;
        const allowMissing = ctb.optional === true;
        let pem: string;
        if (ctb.name) pem = await host.getTrustAnchorsByName(ctb.name, allowMissing);
        else if (ctb.signerName)
          pem = await host.getTrustAnchorsBySigner(ctb.signerName, ctb.labelSelector, allowMissing);
        else
          throw new VolumeError(
            'InvalidField',
            'ClusterTrustBundle projection requires either name or signerName to be set',
          );
        payload.set(ctb.path, { data: pem, mode: privateMode, fsUser: args.fsUser });
      }
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length === 1)
    throw errors[0] instanceof VolumeError
      ? errors[0]
      : new VolumeError('ProjectionFailed', errorMessage(errors[0]));
  if (errors.length > 1) {
    const message = `[${errors.map((e) => errorMessage(e)).join(', ')}]`;
    throw new VolumeError(reasonOf(errors[0], 'ProjectionFailed'), message);
  }
  return payload;
}

export function projectedPlugin(): VolumePlugin {
  return wrappedVolumePlugin({
    name: projectedPluginName,
    medium: 'Memory',
    canSupport: (spec) => Boolean(spec.volume?.projected),
    payload: (host, spec, pod, args) => collectProjectedData(host, pod, spec.volume?.projected ?? {}, args),
    constructVolumeSpec: (name) => ({ volume: { name, projected: { sources: [] } }, readOnly: false }),
    afterTearDown: (host, podUID) => host.deleteServiceAccountTokenFunc()(podUID),
  });
}
