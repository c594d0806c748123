// kubelet's makeMounts (pkg/kubelet/kubelet_pods.go) for a runtime that is
// not kubelet: a container's volumeMounts, in order, as OCI runtime-spec mount
// objects, and GetExtraSupplementalGroupsForPod. subPath and subPathExpr are
// resolved and bind-mounted safely (volumehost/subpath.ts) so the runtime
// never follows a path the container controls. `image` volumes have nothing
// on the host: as kubelet hands CRI an image spec for them (Mount.Image,
// ImageSubPath), they are listed apart, for the runtime to mount the image.
import { isAbsolute } from 'node:path';
import type { V1Container, V1Pod, V1VolumeMount } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { resolveInRoot } from '../../volumehost/hostroot.ts';
import { hasBacksteps } from '../../volumehost/paths.ts';
import type { SubPather } from '../../volumehost/subpath.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import { containerEnv, expandSubPathExpr } from './env.ts';
import { invalidMount, RuntimeApiError } from './errors.ts';
import type { PodVolume, RuntimeState } from './types.ts';

/** An entry of config.json's `mounts` (OCI runtime spec). */
export interface OciMount {
  destination: string;
  type: 'bind';
  source: string;
  options: string[];
}

/**
 * An `image` volume mounted into the container (kubelet's CRI Mount with an
 * image spec): the runtime pulls `reference` per `pullPolicy` and mounts it,
 * or its `subPath`, read-only at `destination`. Not an OCI mount: there is no
 * host path to bind.
 */
export interface ImageVolumeMount {
  destination: string;
  reference: string;
  pullPolicy?: string;
  /** subPath or the expanded subPathExpr, checked as kubelet checks it (relative, no '..'). */
  subPath?: string;
  readOnly: true;
  /** The mount's propagation, as the OCI option word (rprivate, rslave, rshared). */
  propagation: string;
}

export interface ContainerMounts {
  /** OCI runtime-spec bind mounts, in volumeMounts order (image volumes left out). */
  mounts: OciMount[];
  /** The image volumes, in volumeMounts order. */
  imageVolumes: ImageVolumeMount[];
}

export interface FoundContainer {
  container: V1Container;
  /** `spec.containers[0]`: where kubelet's field errors point. */
  field: string;
}

/** Containers, init containers and ephemeral containers, by name. */
export function findContainer(pod: V1Pod, name: string): FoundContainer | undefined {
  const lists: [string, V1Container[] | undefined][] = [
    ['containers', pod.spec?.containers],
    ['initContainers', pod.spec?.initContainers],
    ['ephemeralContainers', pod.spec?.ephemeralContainers],
  ];
  for (const [kind, list] of lists) {
    const i = (list ?? []).findIndex((c) => c?.name === name);
    const container = list?.[i];
    if (container) return { container, field: `spec.${kind}[${i}]` };
  }
  return undefined;
}

/** translateMountPropagation, plus the API server's rule that Bidirectional needs a privileged container. */
export function propagationOption(mount: V1VolumeMount, privileged: boolean, field: string): string {
  switch (mount.mountPropagation) {
    case undefined:
    case null:
    case 'None':
      return 'rprivate';
    case 'HostToContainer':
      return 'rslave';
    case 'Bidirectional':
      if (!privileged) {
        throw invalidMount(
          'BidirectionalNotPrivileged',
          `${field}.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers`,
        );
      }
      return 'rshared';
    default:
      throw invalidMount(
        'InvalidMountPropagation',
        `invalid MountPropagation mode: "${mount.mountPropagation}"`,
      );
  }
}

/** What makeMounts needs to create a subPath bind mount (volumehost/subpath.ts). */
export type SubPathPreparer = Pick<SubPather, 'prepare'>;

export interface MakeMountsOptions {
  state: RuntimeState;
  host: VolumeHost;
  subPaths: SubPathPreparer;
}

export async function makeMounts(
  o: MakeMountsOptions,
  pod: V1Pod,
  found: FoundContainer,
  volumes: Map<string, PodVolume>,
): Promise<ContainerMounts> {
  const { container, field } = found;
  const privileged = container.securityContext?.privileged === true;
  const uid = pod.metadata?.uid ?? '';
  let env: Map<string, string> | undefined;
  const out: OciMount[] = [];
  const imageVolumes: ImageVolumeMount[] = [];
  const mounts = container.volumeMounts ?? [];
  for (const [i, mount] of mounts.entries()) {
    const vol = volumes.get(mount.name);
    const image = vol?.spec?.volume?.image ?? undefined;
    const volumePath = vol?.path;
    if (!vol || (!image && !volumePath)) {
      throw new RuntimeApiError(
        409,
        'VolumeNotReady',
        `cannot find volume "${mount.name}" to mount into container "${container.name}"`,
      );
    }
    let subPath = mount.subPath ?? '';
    if (mount.subPathExpr) {
      try {
        env ??= await containerEnv(pod, container, o.host);
        subPath = expandSubPathExpr(mount.subPathExpr, env);
      } catch (err) {
        throw invalidMount('InvalidSubPathExpr', errorMessage(err));
      }
    }
    if (subPath !== '') {
      if (isAbsolute(subPath)) {
        throw invalidMount('InvalidSubPath', `error SubPath \`${subPath}\` must not be an absolute path`);
      }
      if (hasBacksteps(subPath)) {
        throw invalidMount(
          'InvalidSubPath',
          `unable to provision SubPath \`${subPath}\`: must not contain '..'`,
        );
      }
    }
    const destination = mount.mountPath.startsWith('/') ? mount.mountPath : `/${mount.mountPath}`;
    const propagation = propagationOption(mount, privileged, `${field}.volumeMounts[${i}]`);
    if (image) {
      // kubelet: Image and ImageSubPath instead of a host path; the runtime checks the subPath again.
      imageVolumes.push({
        destination,
        reference: image.reference ?? '',
        ...(image.pullPolicy ? { pullPolicy: image.pullPolicy } : {}),
        ...(subPath !== '' ? { subPath } : {}),
        readOnly: true,
        propagation,
      });
      continue;
    }
    // Checked above (only an image volume has no host path); an answer without a mount is never right.
    if (!volumePath)
      throw new RuntimeApiError(409, 'VolumeNotReady', `volume "${mount.name}" has no path on the host`);
    let source = volumePath;
    if (subPath !== '') {
      try {
        source = await o.subPaths.prepare({
          podUID: uid,
          volumeName: vol.innerName ?? mount.name,
          // A hostPath is the host's path: podvol in a container sees it under --host-root.
          volumePath:
            vol.pluginName === 'kubernetes.io/host-path'
              ? await resolveInRoot(o.host.getHostRoot?.() ?? '/', source, o.host.getFs().ops)
              : source,
          containerName: container.name,
          index: i,
          subPath,
        });
      } catch (err) {
        throw invalidMount('SubPathFailed', errorMessage(err));
      }
    }
    const readOnly = mount.readOnly === true || o.state.volumeReadOnly(vol, pod);
    out.push({
      destination,
      type: 'bind',
      source,
      options: ['rbind', readOnly ? 'ro' : 'rw', propagation],
    });
  }
  return { mounts: out, imageVolumes };
}

/** The GID annotation kubelet reads from a persistent volume (volume.VolumeGidAnnotationKey). */
export const VOLUME_GID_ANNOTATION = 'pv.beta.kubernetes.io/gid';

/**
 * GetExtraSupplementalGroupsForPod: the GIDs persistent volumes of the pod
 * carry in their annotation, minus those the pod already lists, sorted as
 * kubelet's string set sorts them.
 */
export function extraSupplementalGroups(pod: V1Pod, volumes: Map<string, PodVolume>): number[] {
  const values = new Set<string>();
  for (const v of volumes.values()) {
    const gid = v.spec?.persistentVolume?.metadata?.annotations?.[VOLUME_GID_ANNOTATION];
    if (gid) values.add(gid);
  }
  const have = new Set((pod.spec?.securityContext?.supplementalGroups ?? []).map(Number));
  const out: number[] = [];
  for (const s of [...values].sort()) {
    if (!/^\d+$/.test(s)) continue;
    const n = Number(s);
    if (n > 0xffffffff || have.has(n)) continue;
    out.push(n);
  }
  return out;
}
