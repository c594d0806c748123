// kubelet's pkg/volume/util/selinux.go: the SELinux label a volume is mounted
// with (`-o context=...`) instead of the container runtime relabelling every
// file of it, and when that applies. Only CSI uses it (a CSIDriver with
// seLinuxMount: true).
import type { V1Pod, V1SELinuxOptions } from '@kubernetes/client-node';
import { type Spec, VolumeError } from '../../volumehost/volume.ts';

/**
 * kubelet's SELinuxOptionsToFileLabel for a container's seLinuxOptions, with
 * the empty parts filled as kubelet's translator fills them from the
 * container policy's defaults (those of Fedora/RHEL's container-selinux, which
 * kubelet's own test translator uses too): user system_u, role object_r, the
 * process type container_t (or none) as the file type container_file_t, and
 * level s0:c998,c999 where the pod gave none (kubelet allocates a random MCS
 * level there; podvol, which starts no containers, has no runtime to agree
 * one with). No options at all: no label.
 */
export function seLinuxOptionsToFileLabel(opts: V1SELinuxOptions | undefined): string {
  if (!opts || !(opts.user || opts.role || opts.type || opts.level)) return '';
  const type = !opts.type || opts.type === 'container_t' ? 'container_file_t' : opts.type;
  return `${opts.user || 'system_u'}:${opts.role || 'object_r'}:${type}:${opts.level || 's0:c998,c999'}`;
}

/**
 * kubelet's GetPodVolumeNames with collectSELinuxOptions: the effective
 * seLinuxOptions of every container (init, regular, ephemeral) that mounts
 * the volume. A container's own seLinuxOptions replace the pod's whole
 * (DetermineEffectiveSecurityContext copies the struct, it does not merge).
 */
export function containerSELinuxContexts(pod: V1Pod, volumeName: string): V1SELinuxOptions[] {
  const spec = pod.spec;
  const out: V1SELinuxOptions[] = [];
  const containers = [
    ...(spec?.initContainers ?? []),
    ...(spec?.containers ?? []),
    ...(spec?.ephemeralContainers ?? []),
  ];
  for (const c of containers) {
    if (!(c.volumeMounts ?? []).some((m) => m.name === volumeName)) continue;
    const opts = c.securityContext?.seLinuxOptions ?? spec?.securityContext?.seLinuxOptions;
    if (opts) out.push(opts);
  }
  return out;
}

/**
 * kubelet's VolumeSupportsSELinuxMount: with the SELinuxMountReadWriteOncePod
 * gate (beta, on by default since 1.28) and not the SELinuxMount gate (beta,
 * off by default since 1.33), only a PersistentVolume whose only access mode
 * is ReadWriteOncePod qualifies: a volume several pods may use at once cannot
 * carry one pod's label. With SELinuxMount, every PersistentVolume does.
 * Inline (ephemeral) CSI volumes never do.
 */
export function volumeSupportsSELinuxMount(spec: Spec, seLinuxMountGate: boolean): boolean {
  const pv = spec.persistentVolume;
  if (!pv) return false;
  if (seLinuxMountGate) return true;
  const modes = pv.spec?.accessModes ?? [];
  return modes.length === 1 && modes[0] === 'ReadWriteOncePod';
}

/**
 * kubelet's GetMountSELinuxLabel plus the access-mode rule its desired state
 * applies: the label to mount the volume with, or '' for none. None on a host
 * without SELinux, when the driver does not support it, when no container
 * using the volume has seLinuxOptions, when the pod asks for the runtime's
 * recursive relabel (seLinuxChangePolicy: Recursive, SELinuxChangePolicy gate
 * on by default since 1.33), or when the access modes do not qualify.
 * Containers that would need different labels on one volume fail it, as in
 * kubelet ("multiple SELinux labels found").
 */
export function mountSELinuxLabel(
  spec: Spec,
  pod: V1Pod,
  o: { seLinuxEnabled: boolean; pluginSupportsSELinuxContextMount: boolean; seLinuxMountGate: boolean },
): string {
  if (!o.seLinuxEnabled) return '';
  const volumeName = spec.volume?.name ?? '';
  const labels = new Set(containerSELinuxContexts(pod, volumeName).map(seLinuxOptionsToFileLabel));
  if (labels.size > 1) {
    throw new VolumeError('SELinuxLabelConflict', `multiple SELinux labels found: ${[...labels].join(',')}`);
  }
  const [label = ''] = labels;
  if (label === '' || !o.pluginSupportsSELinuxContextMount) return '';
  if (pod.spec?.securityContext?.seLinuxChangePolicy === 'Recursive') return '';
  return volumeSupportsSELinuxMount(spec, o.seLinuxMountGate) ? label : '';
}

/**
 * kubelet's AddSELinuxMountOption: `context="<label>"`, quoted as Go's %q
 * quotes it, so that the commas of a level (s0:c1,c2) stay inside one option.
 */
export function addSELinuxMountOption(options: string[], label: string): string[] {
  return [...options, `context="${label.replace(/["\\]/g, (c) => `\\${c}`)}"`];
}
