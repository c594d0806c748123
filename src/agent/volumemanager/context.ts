// What the parts of the volume manager share: the two states of the world, the
// operation executor, and the node-level dependencies. One object, built once by
// VolumeManager, handed to the populator, reconciler, reconstruction and orphan cleanup.

import type { Logger } from '../../logger.ts';
import type * as mount from '../../mount/types.ts';
import type { VolumeReason } from '../../reasons.ts';
import type { VolumePluginMgr } from '../../volumehost/plugin-manager.ts';
import type { SafeFs } from '../../volumehost/safe-fs.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import type { ActualStateOfWorld, MountedVolume } from './actual-state.ts';
import type { DesiredStateOfWorld, VolumeToMount } from './desired-state.ts';
import type { OperationExecutor } from './operation-executor.ts';
import type { SpecChange } from './reconciler.ts';
import type { Terminating } from './status.ts';

/**
 * kubelet's --volume-stats-agg-period default: emptyDir usage is measured at
 * most this often (volume-stats.ts). Here, in a module without imports, so
 * the CLI shows the default without loading the plugins.
 */
export const VOLUME_STATS_PERIOD_MS = 60_000;

/** kubelet's --sync-frequency default: how often remount-requiring volumes are re-rendered. */
export const SYNC_FREQUENCY_MS = 60_000;

/** --teardown-settle-period's default: how long a suspicious first-sync teardown is held (settle-guard.ts). */
export const TEARDOWN_SETTLE_PERIOD_MS = 30_000;

/**
 * The operation_name of storage_operation_duration_seconds and the operation
 * of podvol_operation_errors_total. kubelet's names, and volume_refresh:
 * SetUp of a volume that is already mounted (configMap, secret, downwardAPI
 * and projected files re-rendered every --sync-frequency or when an object
 * changes, a CSI driver's requiresRepublish), which kubelet counts as
 * volume_mount. unmount_device: kubelet's UnmountDevice (a CSI NodeUnstageVolume),
 * an operation of its own after the pods' volume_unmount. Apart, the refreshes (one a minute per such volume by
 * default) no longer hide a node's real mounts in the same series.
 */
export type OperationName =
  | 'volume_mount'
  | 'volume_refresh'
  | 'volume_unmount'
  | 'unmount_device'
  | 'volume_fs_resize';

export interface VolumeManagerMetrics {
  operation(plugin: string, operation: OperationName, ok: boolean, seconds: number): void;
  operationError(operation: string, reason: VolumeReason): void;
  reconcile(seconds: number): void;
  reconstructed(ok: boolean): void;
  /** A volume that failed reconstruction was force-cleaned (ok) or could not be. */
  forceCleaned?(ok: boolean): void;
}

export interface VolumeManagerContext {
  rootDir: string;
  host: VolumeHost;
  pluginMgr: VolumePluginMgr;
  mounter: mount.Interface;
  logger: Logger;
  metrics: VolumeManagerMetrics;
  dsw: DesiredStateOfWorld;
  asw: ActualStateOfWorld;
  executor: OperationExecutor;
  /**
   * The mount table as `mounter.list()` gives it, read at or after this call and shared with the
   * concurrent callers (fresh-read.ts): the hung-filesystem checks of concurrent operations.
   */
  freshMountTable: () => Promise<readonly mount.MountInfo[]>;
  /** Whether a desired volume's spec changed under a mounted one (reconciler.ts createSpecChange). */
  specChange: (v: MountedVolume, d: VolumeToMount | undefined) => SpecChange;
  /**
   * The runtime contract's teardown rule: a pod no longer desired whose
   * volumes a runtime may still use is held (with its deadline) until the
   * runtime reports it terminated or its grace period is over.
   */
  heldPod?: (uid: string) => Terminating | undefined;
  /** kubelet's subpather.CleanSubPaths: a volume's subPath bind mounts go before the volume. */
  cleanSubPaths?: (podUID: string, innerName: string, fs: SafeFs) => Promise<void>;
}

/**
 * Whether a pod still has volumes: one in the actual state, or an operation
 * running for one (a SetUp still running records its result in the actual
 * state only when it ends, so the state alone would call the pod done too
 * early). The daemon's "pod in use" and orphan cleanup ask this one question.
 */
export function podHasVolumes(ctx: Pick<VolumeManagerContext, 'asw' | 'executor'>, uid: string): boolean {
  return ctx.asw.hasPod(uid) || ctx.executor.anyPending(`${uid}/`);
}
