// Who keeps a mount busy. umount(2) says only EBUSY; kubelet then retries
// forever and the operator is left to run fuser and lsof by hand. This reads
// /proc the way those tools do and names every process that holds the mount:
// a working or root directory, an open file or a mapped file below it, or a
// mount namespace that still has the filesystem mounted (a container's copy
// of the mount keeps its filesystem alive after the host's is gone).
// Only read on the failure path; a process that exits mid-scan is skipped.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { posix } from 'node:path';
import { mountPointMatches, parseMountInfo } from './mountinfo.ts';
import type { MountInfo } from './types.ts';

export interface MountHolder {
  pid: number;
  /** The program name: the base name of argv[0] (or comm when there is none). */
  command: string;
  /** How it holds the mount: "cwd", "root", "open file <path>", "mapped file <path>", "mount namespace". */
  holds: string[];
}

const within = (path: string, base: string) =>
  base === '/' ? path.startsWith('/') : path === base || path.startsWith(`${base}/`);

/** Bounds the message: a process with thousands of open files is named once with a count. */
const MAX_FILES_SHOWN = 3;

async function tryRead<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch {
    return undefined;
  }
}

/**
 * Every process holding the mount at `target` (absolute, as in our mountinfo),
 * ordered by PID, this process included (a leaked descriptor of podvol's own
 * is worth naming too); processes in this mount namespace are not listed for
 * the namespace itself.
 * `procRoot` is for tests.
 */
export async function findMountHolders(target: string, procRoot = '/proc'): Promise<MountHolder[]> {
  const own = parseMountInfo((await tryRead(() => readFile(`${procRoot}/self/mountinfo`, 'utf8'))) ?? '');
  const mount = own.findLast((m) => mountPointMatches(m, target));
  const ownNs = await tryRead(() => readlink(`${procRoot}/self/ns/mnt`));
  const pids = ((await tryRead(() => readdir(procRoot))) ?? []).filter((n) => /^\d+$/.test(n));
  /** mount namespace -> does it have the filesystem of `target` mounted; read once per namespace. */
  const nsSees = new Map<string, boolean>();
  const holders: MountHolder[] = [];
  for (const pid of pids) {
    const dir = `${procRoot}/${pid}`;
    const holds: string[] = [];
    for (const link of ['cwd', 'root'] as const) {
      const to = await tryRead(() => readlink(`${dir}/${link}`));
      if (to !== undefined && within(to, target)) holds.push(link);
    }
    const files: string[] = [];
    for (const fd of (await tryRead(() => readdir(`${dir}/fd`))) ?? []) {
      const to = await tryRead(() => readlink(`${dir}/fd/${fd}`));
      if (to !== undefined && within(to, target)) files.push(to);
    }
    if (files.length > 0) {
      const shown = [...new Set(files)].slice(0, MAX_FILES_SHOWN).map((f) => `open file ${f}`);
      if (files.length > MAX_FILES_SHOWN) shown.push(`${files.length - MAX_FILES_SHOWN} more open files`);
      holds.push(...shown);
    }
    const maps = (await tryRead(() => readFile(`${dir}/maps`, 'utf8'))) ?? '';
    const mapped = new Set<string>();
    for (const line of maps.split('\n')) {
      const i = line.indexOf(' /');
      if (i !== -1 && within(line.slice(i + 1), target)) mapped.add(line.slice(i + 1));
    }
    for (const f of [...mapped].slice(0, MAX_FILES_SHOWN)) holds.push(`mapped file ${f}`);
    const ns = await tryRead(() => readlink(`${dir}/ns/mnt`));
    if (mount && ns !== undefined && ns !== ownNs) {
      if (!nsSees.has(ns)) {
        const theirs = (await tryRead(() => readFile(`${dir}/mountinfo`, 'utf8'))) ?? '';
        nsSees.set(
          ns,
          parseMountInfo(theirs).some((m) => sameFilesystemBelow(m, mount)),
        );
        // The first process seen in a namespace stands for it; the others add nothing new.
        if (nsSees.get(ns)) holds.push('mount namespace');
      }
    }
    if (holds.length === 0) continue;
    // argv[0], as ps shows it: comm can be a thread's name (node's main thread calls itself MainThread).
    const argv0 = ((await tryRead(() => readFile(`${dir}/cmdline`, 'utf8'))) ?? '').split('\0')[0];
    const command = argv0
      ? posix.basename(argv0)
      : ((await tryRead(() => readFile(`${dir}/comm`, 'utf8'))) ?? '?').trim();
    holders.push({ pid: Number(pid), command, holds });
  }
  return holders.sort((a, b) => a.pid - b.pid);
}

/** `m` (in another namespace) shows the directory `mount` shows, or a part of it. */
function sameFilesystemBelow(m: MountInfo, mount: MountInfo): boolean {
  return m.major === mount.major && m.minor === mount.minor && within(posix.normalize(m.root), mount.root);
}

/** "pid 4242 (sleep): cwd; pid 4343 (crun): mount namespace" */
export function formatHolders(holders: readonly MountHolder[]): string {
  return holders.map((h) => `pid ${h.pid} (${h.command}): ${h.holds.join(', ')}`).join('; ');
}
