// The mount layer's contract, modelled on kubernetes/mount-utils `Interface`.
// Everything above src/mount talks to this interface only, so tests of the
// upper layers can use the fake mounter and real runs use the Linux one.

/** One line of /proc/self/mountinfo, unescaped. */
export interface MountInfo {
  id: number;
  parentId: number;
  major: number;
  minor: number;
  /** Root of the mount within the filesystem (field 4). */
  root: string;
  /** Mount point relative to the process root (field 5). */
  mountPoint: string;
  /** Per-mount options (field 6), split on ','. Shared between entries: never mutated. */
  mountOptions: readonly string[];
  /** Optional fields such as `shared:1`, `master:2` (fields 7..n before '-'). */
  optionalFields: readonly string[];
  fsType: string;
  source: string;
  /** Per-superblock options, split on ',', escapes decoded. Shared between entries: never mutated. */
  superOptions: readonly string[];
  /**
   * The kernel printed the mount point with a `\040(deleted)` suffix (the mount's
   * root dentry was unlinked, e.g. a bind-mounted file whose source was removed).
   * `mountPoint` then holds the path without the suffix. Absent means false.
   */
  deleted?: boolean;
}

/** How an unmount ended; callers log it and may surface it in status. */
export type UnmountOutcome = 'unmounted' | 'not-mounted' | 'forced' | 'lazy';

export interface MountCallOptions {
  /** Options whose values must never appear in logs or errors (passwords, tokens). */
  sensitiveOptions?: string[];
  /** Never wrap in `systemd-run --scope` (kubelet does this for tmpfs, hugetlbfs, subpaths). */
  withoutSystemd?: boolean;
  /** Extra flags placed before -t/-o, e.g. `--no-canonicalize`. */
  mountFlags?: string[];
}

/** mount-utils' `mount.Interface`; import it as `import type * as mount` and write `mount.Interface`. */
export interface Interface {
  /**
   * mount [-t fstype] [-o options] [source] target. A "bind" in options is done
   * in two steps (bind, then bind,remount,<flags>) so ro/nosuid/nodev/noexec apply.
   */
  mount(
    source: string,
    target: string,
    fstype: string,
    options: string[],
    call?: MountCallOptions,
  ): Promise<void>;
  /** umount target; unmounting something not mounted is success ('not-mounted'). */
  unmount(target: string): Promise<UnmountOutcome>;
  /**
   * For a filesystem that does not answer: umount with a deadline; on timeout
   * (or busy: its stuck requests hold it) retried as `umount -f`, then `umount -l`.
   */
  unmountWithForce(target: string, timeoutMs: number): Promise<UnmountOutcome>;
  /** Cheap check by device numbers; false means "probably a mount point". ENOENT throws. */
  isLikelyNotMountPoint(path: string): Promise<boolean>;
  /** Exact check against mountinfo. */
  isMountPoint(path: string): Promise<boolean>;
  /**
   * The current mount table (from /proc/self/mountinfo for the real mounter),
   * shared with other callers until it changes: read-only.
   */
  list(): Promise<readonly MountInfo[]>;
  /** Other mount points of the same filesystem root as `path` (bind mounts of it). */
  getMountRefs(path: string): Promise<string[]>;
}
