// --host-root: when podvol runs in a container with the host's / mounted at,
// say, /host, a hostPath is the host's path, so it is looked up under that
// directory as if chrooted there (filepath-securejoin's semantics): an
// absolute symlink on the host (/var/run -> /run) restarts at the host root,
// `..` never climbs above it, and a symlink can never lead out of it into the
// container's own filesystem.
import { join } from 'node:path';
import type { FsOps } from './fs.ts';

/** --host-root's default: podvol runs on the host, whose / is its own. */
export const DEFAULT_HOST_ROOT = '/';

const MAX_SYMLINKS = 40; // Linux's MAXSYMLINKS

/**
 * The path under `root` that `path` names on the host, with every symlink that
 * exists resolved inside `root`. Components that do not exist are kept as
 * written (so *OrCreate can create them). `root` '/' returns `path` unchanged.
 */
export async function resolveInRoot(
  root: string,
  path: string,
  fs: Pick<FsOps, 'lstat' | 'readlink'>,
): Promise<string> {
  if (root === '/' || root === '') return path;
  const pending = path.split('/').filter((p) => p !== '' && p !== '.');
  const done: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift();
    if (part === undefined) break;
    if (part === '..') {
      done.pop(); // clamped at the root
      continue;
    }
    const candidate = join(root, ...done, part);
    let st: Awaited<ReturnType<FsOps['lstat']>> | undefined;
    try {
      st = await fs.lstat(candidate);
    } catch {
      // Missing (or unreadable): the rest is taken as written.
      done.push(part, ...pending.filter((p) => p !== '..'));
      break;
    }
    if (!st.isSymbolicLink()) {
      done.push(part);
      continue;
    }
    if (++hops > MAX_SYMLINKS) {
      const e: NodeJS.ErrnoException = new Error(
        `too many levels of symbolic links resolving ${path} under ${root}`,
      );
      e.code = 'ELOOP';
      throw e;
    }
    const target = await fs.readlink(candidate);
    if (target.startsWith('/')) done.length = 0;
    pending.unshift(...target.split('/').filter((p) => p !== '' && p !== '.'));
  }
  return join(root, ...done);
}
