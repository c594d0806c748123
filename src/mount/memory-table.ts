// A mount table kept in memory: what mount(2) and umount(2) would do to
// /proc/self/mountinfo, without doing them. `podvol plan`'s recording mounter
// (src/agent/ops/plan-mounter.ts) runs the daemon's code against one that
// starts as this host's table; the tests' fake mounter keeps one too. One
// home for the rules: a bind shows its source's filesystem and directory (so
// getMountRefs finds it), per-mount flags land in the mount options, the rest
// in the superblock's, sensitive options are never stored.
import { posix, resolve } from 'node:path';
import { isMountPointIn, mountContaining, mountPointMatches, searchMountRefs } from './mountinfo.ts';
import type { MountInfo } from './types.ts';

const PER_MOUNT_FLAGS: ReadonlySet<string> = new Set([
  'ro',
  'rw',
  'nosuid',
  'nodev',
  'noexec',
  'noatime',
  'relatime',
  'nodiratime',
]);

export class MemoryMountTable {
  readonly #mounts: MountInfo[] = [];
  #nextId = 1000;

  /** `initial`: ids and missing fields are filled in. */
  constructor(initial: ReadonlyArray<Partial<MountInfo> & { mountPoint: string }> = []) {
    for (const m of initial) this.add(m);
    // New mounts get ids no initial entry has (a table copied from the host has large ones).
    this.#nextId = Math.max(this.#nextId, ...this.#mounts.map((m) => m.id + 1));
  }

  /** The table as it is now (not a copy: read it, do not change it). */
  entries(): readonly MountInfo[] {
    return this.#mounts;
  }

  /** A copy of every entry, as mount.Interface.list returns it. */
  list(): MountInfo[] {
    return this.#mounts.map((m) => ({
      ...m,
      mountOptions: [...m.mountOptions],
      optionalFields: [...m.optionalFields],
      superOptions: [...m.superOptions],
    }));
  }

  /** Adds an entry as if something else had mounted it. */
  add(m: Partial<MountInfo> & { mountPoint: string }): MountInfo {
    const id = m.id ?? this.#nextId++;
    const mountPoint = resolve(m.mountPoint);
    const entry: MountInfo = {
      id,
      parentId: m.parentId ?? mountContaining(this.#mounts, mountPoint)?.id ?? 1,
      major: m.major ?? 0,
      minor: m.minor ?? id,
      root: m.root ?? '/',
      mountPoint,
      mountOptions: m.mountOptions ?? ['rw'],
      optionalFields: m.optionalFields ?? [],
      fsType: m.fsType ?? 'tmpfs',
      source: m.source ?? 'none',
      superOptions: m.superOptions ?? ['rw'],
    };
    this.#mounts.push(entry);
    return entry;
  }

  /** The entry mount(8) of `source` at `target` adds (the request already validated). */
  mount(source: string, target: string, fstype: string, options: readonly string[]): MountInfo {
    const mountPoint = resolve(target);
    const flags = options.filter((o) => PER_MOUNT_FLAGS.has(o));
    const mountOptions = flags.includes('ro')
      ? flags.filter((o) => o !== 'rw')
      : ['rw', ...flags.filter((o) => o !== 'rw')];
    if (options.includes('bind') || options.includes('rbind')) {
      const src = resolve(source);
      const own = mountContaining(this.#mounts, src);
      const rel = own ? (own.mountPoint === '/' ? src : src.slice(own.mountPoint.length)) : '';
      return this.add({
        mountPoint,
        major: own?.major ?? 0,
        minor: own?.minor ?? 1,
        root: own ? posix.join(own.root, rel) : src,
        fsType: own?.fsType ?? 'none',
        source: own?.source ?? source,
        mountOptions,
        superOptions: own?.superOptions ?? ['rw'],
      });
    }
    return this.add({
      mountPoint,
      fsType: fstype || 'none',
      source,
      mountOptions,
      // Sensitive options are never passed here (mount.MountCallOptions.sensitiveOptions).
      superOptions: ['rw', ...options.filter((o) => !PER_MOUNT_FLAGS.has(o))],
    });
  }

  /** Removes the top mount at `target` (umount(2)); false if nothing is mounted there. */
  unmount(target: string): boolean {
    const path = resolve(target);
    const i = this.#mounts.findLastIndex((m) => mountPointMatches(m, path));
    if (i < 0) return false;
    this.#mounts.splice(i, 1);
    return true;
  }

  /** Is anything mounted exactly at `path` (absolute, resolved)? */
  isMountPoint(path: string): boolean {
    return isMountPointIn(this.#mounts, resolve(path));
  }

  /** mount-utils GetMountRefs over this table: `path` resolved by the caller. */
  mountRefs(path: string): string[] {
    return mountContaining(this.#mounts, path) ? searchMountRefs(this.#mounts, path) : [];
  }
}
