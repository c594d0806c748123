// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
// | RESOLVE_NO_XDEV, through the native/openat2 addon: the kernel resolves a
// whole relative path below an open directory in one call and refuses what
// safe-fs.ts's walk refuses component by component (a symlink anywhere: ELOOP;
// a mount point, bind mounts included: EXDEV; a non-directory on the way:
// ENOTDIR). runc's filepath-securejoin and libpathrs rely on the same flags.
//
// Absent (no compiler at install, a kernel before 5.6, a seccomp filter that
// refuses the call) it reports `ENOSYS`, and safe-fs walks instead. The call
// runs on libuv's thread pool, as fs.promises.open does, so a hung filesystem
// holds a pool thread, never the event loop.

import { loadAddon } from '../addon.ts';

type Addon = {
  openat2(dirfd: number, path: string, flags: number, mode: number, resolve: number): Promise<number>;
  supported(): boolean;
  RESOLVE_NO_XDEV: number;
  RESOLVE_NO_MAGICLINKS: number;
  RESOLVE_NO_SYMLINKS: number;
  RESOLVE_BENEATH: number;
};

/** Opens `rel` below the directory `dirfd` under the walk's rules; resolves to the new fd. */
export type OpenBeneath = (dirfd: number, rel: string, flags: number, mode?: number) => Promise<number>;

const unavailable = (why: string) =>
  Object.assign(new Error(`ENOSYS: openat2 unavailable (${why})`), { code: 'ENOSYS' });

/**
 * The beneath-opener, loaded on its first call (in the single executable the
 * addon is extracted from the SEA assets then, not at start-up). When the addon
 * or the system call is missing every call rejects with code ENOSYS; the
 * reason is checked once, not per call.
 */
export function openat2Beneath(): OpenBeneath {
  let state: { addon: Addon; resolve: number } | { error: Error } | undefined;
  const load = () => {
    try {
      const addon = loadAddon<Addon>('openat2');
      if (!addon.supported()) return { error: unavailable('the kernel does not serve it') };
      const resolve =
        addon.RESOLVE_BENEATH |
        addon.RESOLVE_NO_SYMLINKS |
        addon.RESOLVE_NO_MAGICLINKS |
        addon.RESOLVE_NO_XDEV;
      return { addon, resolve };
    } catch (err) {
      return { error: unavailable(`the addon is not built: ${String(err).split('\n')[0]}`) };
    }
  };
  return async (dirfd, rel, flags, mode = 0) => {
    state ??= load();
    if ('error' in state) throw state.error;
    return state.addon.openat2(dirfd, rel, flags, mode, state.resolve);
  };
}
