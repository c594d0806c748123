// kubelet's MakeNestedMountpoints (pkg/volume/util/nested_volumes.go): when
// another volume is mounted below this one's mountPath in some container, the
// directory it mounts onto must exist inside this (read-only) volume.
import { posix } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { type SafeDir, type SafeFs, splitBeneath } from '../volumehost/safe-fs.ts';
import { VolumeError } from '../volumehost/volume.ts';

/** Paths, relative to the volume, of the mount points nested directly below it. */
export function nestedMountpoints(volumeName: string, pod: V1Pod): string[] {
  const out: string[] = [];
  const containers = [
    ...(pod.spec?.initContainers ?? []),
    ...(pod.spec?.containers ?? []),
    ...(pod.spec?.ephemeralContainers ?? []),
  ];
  for (const c of containers) {
    const all = (c.volumeMounts ?? []).map((m) =>
      posix.normalize(m.mountPath ?? '').replace(/(.)\/+$/, '$1'),
    );
    const mine = (c.volumeMounts ?? [])
      .filter((m) => m.name === volumeName)
      .map((m) => posix.normalize(m.mountPath ?? '').replace(/(.)\/+$/, '$1'));
    all.sort();
    for (const mp of mine) {
      // kubelet checks only `../x`; `..` itself would let a second mount at
      // `../../x` climb out of the volume, so any climb is refused.
      if (mp === '..' || mp.startsWith('../')) {
        throw new VolumeError('InvalidPath', `invalid container mount point ${mp}`);
      }
      const prefix = `${mp}/`;
      let prevNested = '';
      for (const other of all) {
        if (!other.startsWith(prefix)) continue;
        if (prevNested !== '' && other.startsWith(prevNested)) continue; // double-nested: its parent is enough
        prevNested = `${other}/`;
        const rel = other.slice(prefix.length);
        try {
          splitBeneath(rel);
        } catch {
          throw new VolumeError('InvalidPath', `invalid container mount point ${other}`);
        }
        out.push(rel);
      }
    }
  }
  return out;
}

/** Creates them inside the open volume directory, never following a symlink out of it. */
export async function makeNestedMountpoints(
  fs: SafeFs,
  volumeName: string,
  dir: SafeDir,
  pod: V1Pod,
): Promise<void> {
  for (const rel of nestedMountpoints(volumeName, pod)) {
    await fs.mkdirAllBeneath(dir, rel, 0o755);
  }
}
