// Whether this host runs SELinux: a question about the host, so it is asked
// here, in the volume host's layer, and the plugins (CSI's SELinux mounts,
// src/plugins/util/selinux.ts) take the answer.
import { readFileSync } from 'node:fs';

/**
 * go-selinux's GetEnabled, which kubelet's translator asks first: selinuxfs is
 * mounted and this process runs with a label other than "kernel". On a host
 * without SELinux (no selinuxfs; /proc/self/attr/current refuses to be read)
 * kubelet does nothing SELinux-specific at all, and neither does podvol.
 */
export function hostSELinuxEnabled(): boolean {
  let mountinfo: string;
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return false;
  }
  // The filesystem type follows the " - " separator of each mountinfo line.
  if (!mountinfo.split('\n').some((l) => l.split(' - ')[1]?.startsWith('selinuxfs '))) return false;
  try {
    const label = readFileSync('/proc/self/attr/current', 'utf8').replace(/\0+$/, '').trim();
    return label !== '' && label !== 'kernel';
  } catch {
    return false;
  }
}
