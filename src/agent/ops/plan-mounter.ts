// The mounter of `podvol plan`: a mount.Interface that does nothing to the
// host and reports every mount and unmount the daemon's code asks for as a
// step. Its table starts as this host's (read once from /proc/self/mountinfo)
// and changes as mount(2) and umount(2) would change it (memory-table.ts);
// the requests are checked as the Linux mounter checks them (the option
// hygiene of options.ts, no symlink at or on the way to a target, the target
// must exist) on the plan's recording filesystem, which is kept in step with
// the table (its mnt_id and statfs follow it).
import { resolve } from 'node:path';
import { isNotExistError, mountPointMissing } from '../../mount/errors.ts';
import { MemoryMountTable } from '../../mount/memory-table.ts';
import { validateMountRequest } from '../../mount/options.ts';
import { UnsafeTargetError } from '../../mount/target.ts';
import type * as mount from '../../mount/types.ts';
import type { PlanFs } from './plan-fs.ts';

/** A mount or unmount as the plan reports it. */
export type MountStep =
  | { action: 'mount'; path: string; detail: string }
  | { action: 'umount'; path: string };

/** mount(8) arguments before the target, as the daemon's LinuxMounter passes them. */
const mountDetail = (source: string, fstype: string, options: readonly string[]) =>
  `-t ${fstype}${options.length > 0 ? ` -o ${options.join(',')}` : ''} ${source}`;

export interface PlanMounter extends mount.Interface {
  /** The table as it is now, for the recording filesystem (not a copy). */
  table(): readonly mount.MountInfo[];
}

export function createPlanMounter(o: {
  /** The table the plan starts from (this host's). */
  mounts: readonly mount.MountInfo[];
  /** The recording filesystem: where targets are checked, and told of every change of the table. */
  fs: () => PlanFs;
  record(step: MountStep): void;
}): PlanMounter {
  const table = new MemoryMountTable(o.mounts);
  /** As target.ts refuses them: a symlink at the target or on the way to it; a missing target. */
  const checkTarget = async (target: string) => {
    const path = resolve(target);
    try {
      if ((await o.fs().lstat(path)).isSymbolicLink())
        throw new UnsafeTargetError(path, 'the target is a symlink');
      const real = await o.fs().realpath(path);
      if (real !== path)
        throw new UnsafeTargetError(path, `the target resolves to ${real} (a symlink on the way)`);
    } catch (err) {
      if (isNotExistError(err)) throw mountPointMissing(target);
      throw err;
    }
    return path;
  };
  const unmounted = (target: string): mount.UnmountOutcome => {
    if (!table.unmount(target)) return 'not-mounted';
    o.fs().unmounted(target);
    o.record({ action: 'umount', path: resolve(target) });
    return 'unmounted';
  };
  return {
    table: () => table.entries(),
    async mount(source, target, fstype, options, call) {
      validateMountRequest(source, target, fstype, options, call ?? {});
      const path = await checkTarget(target);
      table.mount(source, path, fstype, options);
      o.fs().mounted(path, fstype, options);
      o.record({ action: 'mount', path, detail: mountDetail(source, fstype, options) });
    },
    unmount: async (target) => unmounted(target),
    // Nothing hangs in a plan: a forced unmount is an unmount.
    unmountWithForce: async (target) => unmounted(target),
    async isLikelyNotMountPoint(path) {
      if ((await o.fs().lstat(path)).isSymbolicLink()) return true;
      return !table.isMountPoint(path);
    },
    isMountPoint: async (path) => table.isMountPoint(await o.fs().realpath(path)),
    list: async () => table.list(),
    async getMountRefs(path) {
      let real: string;
      try {
        real = await o.fs().realpath(path);
      } catch (err) {
        if (isNotExistError(err)) return [];
        throw err;
      }
      return table.mountRefs(real);
    },
  };
}
