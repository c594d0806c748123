// kubelet's MakeNestedMountpoints (pkg/volume/util/nested_volumes.go): when
// another volume is mounted below this one's mountPath in some container, the
// directory it mounts onto must exist inside this (read-only) volume.
import { mkdir } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { VolumeError } from './types.ts';

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
      if (mp.startsWith('../')) throw new VolumeError('InvalidPath', `invalid container mount point ${mp}`);
      const prefix = `${mp}/`;
      let prevNested = '';
      for (const other of all) {
        if (!other.startsWith(prefix)) continue;
        if (prevNested !== '' && other.startsWith(prevNested)) continue; // double-nested: its parent is enough
        prevNested = `${other}/`;
        out.push(other.slice(prefix.length));
      }
    }
  }
  return out;
}

export async function makeNestedMountpoints(volumeName: string, dir: string, pod: V1Pod): Promise<void> {
  for (const rel of nestedMountpoints(volumeName, pod)) {
    await mkdir(join(dir, rel), { recursive: true, mode: 0o755 });
  }
}
