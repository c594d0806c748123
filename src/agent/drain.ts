// `podvol drain`: with the daemon stopped, tear down every volume under a root
// directory. It is the volume manager itself run with no pods and every source
// synced, so a volume goes exactly the way a deleted pod's volume goes in the
// daemon: reconstructed from disk and the records, TearDown through its plugin
// (CSI volumes unpublished and unstaged through their drivers, which
// register through <root>/plugins_registry as with the daemon), records removed, and pod directories removed only
// when the mount table shows nothing mounted below them. Nothing outside the
// pod directories and podvol's own bookkeeping is touched.
import { join } from 'node:path';
import { type Clock, sleep, systemClock } from '../clock.ts';
import { errnoCode } from '../errno.ts';
import type { Logger } from '../logger.ts';
import type * as mount from '../mount/types.ts';
import { csiPluginName } from '../plugins/csi/csi-plugin.ts';
import type { DrainReason, VolumeReason } from '../reasons.ts';
import { type FsOps, pathsBelow } from '../volumehost/fs.ts';
import { podDir, podsDir } from '../volumehost/paths.ts';
import type { SafeDir, SafeFs } from '../volumehost/safe-fs.ts';
import { reasonOf } from '../volumehost/volume.ts';
import { ROOT_MARK_DIR, ROOT_MARK_FILE } from './root-dir.ts';
import type { VolumeStack } from './volume-stack.ts';
import { VolumeManager } from './volumemanager/volume-manager.ts';

export interface DrainVolume {
  podUID: string;
  /** `<namespace>/<name>` from the volume's record; empty when there was none. */
  pod: string;
  volume: string;
  plugin: string;
  path: string;
}

export interface DrainLeftover {
  what: string;
  reason: VolumeReason | DrainReason;
  message: string;
}

export interface DrainReport {
  rootDir: string;
  dryRun: boolean;
  /** Volumes found on disk: torn down, or (dry run) to be torn down. */
  volumes: DrainVolume[];
  /** Pod directories found: removed, or (dry run) to be removed once nothing is mounted below them. */
  podDirs: string[];
  /** Mount points below the root directory, as the mount table lists them before the drain. */
  mounts: string[];
  /** What is still there afterwards, and why (empty when the drain is complete; always empty in a dry run). */
  leftovers: DrainLeftover[];
}

export interface DrainOptions {
  rootDir: string;
  stack: VolumeStack;
  logger: Logger;
  dryRun: boolean;
  /** How long to keep retrying failed teardowns (with the volume manager's backoff). */
  timeoutMs: number;
  /** The deadline's and the poll's time, and the volume manager's (default the system's). */
  clock?: Clock;
}

/** How often the drain looks whether everything is gone. */
const POLL_MS = 100;

async function listOrEmpty(fs: FsOps, dir: string): Promise<string[]> {
  try {
    return (await fs.readdir(dir)).sort();
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw err;
  }
}

/**
 * Removes the entry `rel` below `root` with `remove` (unlink or rmdir), through
 * a directory opened without following symlinks. What cannot be removed (gone
 * already, not empty, a mount point, not what `remove` removes) stays.
 */
async function removeBeneath(
  fs: SafeFs,
  root: string,
  rel: string,
  remove: (path: string) => Promise<void>,
): Promise<void> {
  const parts = rel.split('/');
  const name = parts.pop() ?? '';
  let dir: SafeDir;
  try {
    dir = await fs.openDirBeneath(root, parts.join('/'));
  } catch {
    return;
  }
  try {
    await remove(dir.child(name));
  } catch {
    // It stays (or is already gone).
  } finally {
    await dir.close();
  }
}

async function mountsBelow(mounter: mount.Interface, rootDir: string): Promise<string[]> {
  return (await mounter.list()).map((m) => m.mountPoint).filter((mp) => mp.startsWith(`${rootDir}/`));
}

export async function drain(o: DrainOptions): Promise<DrainReport> {
  const { rootDir, stack, logger } = o;
  const clock = o.clock ?? systemClock();
  const fs = stack.host.getFs();
  const vm = new VolumeManager({
    clock,
    rootDir,
    host: stack.host,
    pluginMgr: stack.pluginMgr,
    mounter: stack.mounter,
    logger,
    // No pod is desired and every source has synced: everything found is torn down.
    pods: () => [],
    sourcesReady: () => true,
    // Tearing everything down is the point of a drain: no settle guard (that guards a daemon's first sync).
    settlePeriodMs: 0,
    housekeepingPeriodMs: 200,
    // CSI volumes staged for pods that are all gone are reconstructed as devices and unstaged
    // (NodeUnstageVolume through their driver) by the reconciler's UnmountDevice operations.
  });
  await vm.reconstruct();
  const report: DrainReport = {
    rootDir,
    dryRun: o.dryRun,
    volumes: vm.asw
      .all()
      .map((v) => ({
        podUID: v.podUID,
        pod: v.podName ? `${v.podNamespace}/${v.podName}` : '',
        volume: v.volumeName,
        plugin: v.pluginName,
        path: v.path,
      }))
      .sort((a, b) => a.path.localeCompare(b.path)),
    podDirs: (await listOrEmpty(fs.ops, podsDir(rootDir))).map((uid) => podDir(rootDir, uid)),
    mounts: await mountsBelow(stack.mounter, rootDir),
    leftovers: [],
  };
  if (o.dryRun) return report;

  // CSI drivers register through <root>/plugins_registry, as with the daemon; a driver that
  // registers late is used at once by the volumes waiting for it.
  stack.drivers.onChange(() => vm.retryPlugin(csiPluginName));
  await stack.pluginWatcher.start();
  await vm.start();
  const deadline = clock.now() + o.timeoutMs;
  // Done when nothing is left: no volume, no pod directory, no mount below the root (staged CSI volumes).
  const done = async () =>
    vm.asw.all().length === 0 &&
    vm.asw.devices().length === 0 &&
    (await listOrEmpty(fs.ops, podsDir(rootDir))).length === 0 &&
    (await mountsBelow(stack.mounter, rootDir)).length === 0;
  while (!(await done()) && clock.now() < deadline) await sleep(clock, POLL_MS);
  await vm.stop();
  await stack.pluginWatcher.stop();

  for (const pod of vm.status()) {
    for (const v of pod.volumes) {
      report.leftovers.push({
        what: `volume ${v.name} (${v.plugin}) of pod ${pod.namespace}/${pod.name} (${pod.uid}) at ${v.path}`,
        reason: v.reason || 'TearDownPending',
        message: v.message || 'teardown did not finish in time',
      });
    }
    if (pod.message) {
      report.leftovers.push({
        what: podDir(rootDir, pod.uid),
        reason: 'PodDirectoryRemains',
        message: pod.message,
      });
    }
  }
  // A device still staged: its UnmountDevice's last error (a driver refusing NodeUnstageVolume).
  for (const d of vm.asw.devices()) {
    const err = vm.executor.state(d.deviceName)?.lastError;
    report.leftovers.push({
      what: `device ${d.deviceName} at ${d.deviceMountPath}`,
      reason: err ? reasonOf(err, 'UnmountFailed') : 'TearDownPending',
      message: err?.message ?? 'UnmountDevice did not finish in time',
    });
  }
  const reported = new Set(report.leftovers.map((l) => l.what));
  for (const uid of await listOrEmpty(fs.ops, podsDir(rootDir))) {
    const dir = podDir(rootDir, uid);
    if (!reported.has(dir) && !report.leftovers.some((l) => l.what.includes(`(${uid})`))) {
      report.leftovers.push({ what: dir, reason: 'PodDirectoryRemains', message: 'not removed in time' });
    }
  }
  if (report.leftovers.length === 0) {
    // The directories podvol made for itself and its plugins, once empty (deepest first). Removed
    // through the safe fs primitive: rmdir of one name in an open directory, so nothing is followed
    // through a symlink, and a mount point or a non-empty directory simply stays.
    const own = [
      'pods',
      'podvol/pods',
      'podvol',
      'plugins_registry',
      // Real directories (not symlinks), deepest first.
      ...(await pathsBelow(fs.ops, join(rootDir, 'plugins')))
        .filter((e) => e.isDirectory)
        .map((e) => `plugins/${e.rel}`)
        .reverse(),
      'plugins',
    ];
    // Nothing of a pod is left, so the root directory's mark goes too: an empty root needs no adopting.
    await removeBeneath(fs, rootDir, `${ROOT_MARK_DIR}/${ROOT_MARK_FILE}`, (p) => fs.ops.unlink(p));
    for (const rel of own) await removeBeneath(fs, rootDir, rel, (p) => fs.ops.rmdir(p));
    for (const mp of await mountsBelow(stack.mounter, rootDir)) {
      report.leftovers.push({
        what: mp,
        reason: 'MountsRemain',
        message:
          'mounted below the root directory outside any pod directory, and no plugin took it down (a CSI staging mount of a driver that is not registered, or a mount podvol did not make)',
      });
    }
  }
  return report;
}
