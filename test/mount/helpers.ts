// Helpers for tests that mount for real (inside scripts/test.ts's private mount namespace).
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { tempDir } from '../helpers/mountns.ts';
import { mountPointsAtOrBelow } from '../helpers/mounts.ts';

export function rawMountInfo(): string {
  return readFileSync('/proc/self/mountinfo', 'utf8');
}

/** Lazily detaches everything mounted at or below `dir`, deepest first. Never stats the mounts (some hang). */
function detachAllUnder(dir: string): void {
  for (const p of mountPointsAtOrBelow(dir))
    spawnSync('umount', ['-l', '-c', p], { timeout: 5000, stdio: 'ignore' });
}

/**
 * A temp directory for mount tests. Whatever is still mounted below it is
 * detached before tempDir's recursive removal runs (after hooks run in order),
 * so the removal never descends into a live mount.
 */
export async function scratchDir(t: TestContext): Promise<string> {
  let dir = '';
  t.after(() => {
    if (dir) detachAllUnder(dir);
  });
  dir = await tempDir(t, 'podvol-mount-');
  return dir;
}

/** Runs a command synchronously for test setup; throws with its output on failure. */
export function sh(file: string, args: string[]): string {
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0)
    throw new Error(`${file} ${args.join(' ')} failed (${r.status}): ${r.stderr}${r.error ?? ''}`);
  return r.stdout;
}

export function fuseAvailable(): boolean {
  try {
    closeSync(openSync('/dev/fuse', 'r+'));
    return true;
  } catch {
    return false;
  }
}

/**
 * A real FUSE mount with no daemon: we open /dev/fuse, hand it to mount(8) as
 * fd 3 and never answer the kernel. While the fd stays open every access to
 * the mount blocks (a hung filesystem, like a dead NFS server); once it is
 * closed the connection is aborted and every access fails with ENOTCONN (a
 * corrupted mount). Returns a function that closes the fd.
 * `mount -i`: never run a /sbin/mount.<type> helper. With Debian's `fuse`
 * package installed (bindfs pulls it in) `mount.fuse` would take over every
 * `-t fuse.<name>` and fail on our made-up subtype.
 */
export function mountDaemonlessFuse(t: TestContext, dir: string): { kill(): void } {
  const fd = openSync('/dev/fuse', 'r+');
  let open = true;
  const kill = () => {
    if (open) closeSync(fd);
    open = false;
  };
  t.after(kill);
  const r = spawnSync(
    'mount',
    ['-i', '-t', 'fuse.podvoltest', '-o', 'fd=3,rootmode=40000,user_id=0,group_id=0', 'podvoltest', dir],
    { stdio: ['ignore', 'pipe', 'pipe', fd], encoding: 'utf8', timeout: 10_000 },
  );
  if (r.status !== 0) {
    kill();
    throw new Error(`fuse mount failed: ${r.stderr}`);
  }
  return { kill };
}
