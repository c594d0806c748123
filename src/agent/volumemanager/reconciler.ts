// kubelet's reconciler: compares the desired and actual states of the world and
// starts the operations that close the gap. Unmounts come first, so a volume
// whose spec or plugin changed is torn down before it is set up again.
import type { MountedVolume } from './actual-state.ts';
import type { VolumeManagerContext } from './context.ts';
import type { VolumeToMount } from './desired-state.ts';
import { mountVolume, unmountVolume } from './operation-generator.ts';

/**
 * JSON with sorted keys and without null/undefined members: the same volume
 * from a list (client-node model objects), a watch event (plain JSON) or a
 * record on disk must compare equal whatever the key order.
 */
export function canonicalJSON(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .filter((k) => v[k] !== undefined && v[k] !== null)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}

const sameSpec = (v: MountedVolume, d: VolumeToMount) =>
  !v.specExact || canonicalJSON(v.spec.volume) === canonicalJSON(d.spec?.volume);

/** kubelet's reconciler.unmountVolumes: every mounted volume no longer desired as it is. */
export function unmountVolumes(ctx: VolumeManagerContext): void {
  const { asw, dsw, executor } = ctx;
  for (const v of asw.all()) {
    const d = dsw.volume(v.key);
    if (d && !d.problem && d.pluginName === v.pluginName && sameSpec(v, d)) continue;
    executor.run(v.key, 'volume_unmount', () => unmountVolume(ctx, v));
  }
}

/** kubelet's reconciler.mountOrAttachVolumes: every desired volume not mounted, or due a remount. */
export function mountVolumes(ctx: VolumeManagerContext): void {
  const { asw, dsw, executor } = ctx;
  for (const d of dsw.volumesToMount()) {
    const v = asw.get(d.key);
    if (v && (v.pluginName !== d.pluginName || !sameSpec(v, d))) continue; // unmount first
    if (v && v.state === 'mounted' && !v.remountRequired) continue;
    const pod = dsw.pod(d.podUID)?.pod;
    if (!pod) continue;
    executor.run(d.key, 'volume_mount', () => mountVolume(ctx, d, pod, v));
  }
}
