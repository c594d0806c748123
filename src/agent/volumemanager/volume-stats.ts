// emptyDir usage, as kubelet's volume stats provider measures it for eviction
// (du over the volume, at most once per volume stats period: kubelet's
// --volume-stats-agg-period, 1m0s by default, 0 disables the measurement):
// the used bytes of every mounted emptyDir and, when a volume exceeds its
// sizeLimit, a Warning Event and reason SizeLimitExceeded in /status. kubelet
// evicts such a pod; podvol runs no containers, so it reports.

import { errorMessage } from '../../errno.ts';
import type { MountInfo } from '../../mount/types.ts';
import { emptyDirPluginName } from '../../plugins/emptydir.ts';
import { diskUsage } from '../../plugins/util/disk-usage.ts';
import { formatQuantity, parseQuantity } from '../../plugins/util/quantity.ts';
import { VOLUME_STATS_PERIOD_MS, type VolumeManagerContext } from './context.ts';

export const SizeLimitExceeded = 'SizeLimitExceeded';

export interface EmptyDirUsage {
  usedBytes: number;
  /** The emptyDir's sizeLimit as Quantity.String() prints it, when it has one. */
  sizeLimit?: string;
  /** The sizeLimit in bytes (podvol_emptydir_size_limit_bytes). */
  sizeLimitBytes?: number;
  /** Set while the volume uses more than its sizeLimit: kubelet's eviction message. */
  exceeded?: string;
  /** Set while a filesystem mounted at or below the volume does not answer (FilesystemUnresponsive). */
  unresponsive?: string;
  measuredAt: number;
}

/** One mounted emptyDir's last measured usage, named as an operator knows it: the pod's name, not its UID. */
export interface EmptyDirSample {
  namespace: string;
  pod: string;
  volume: string;
  usedBytes: number;
  /** The sizeLimit in bytes, when the volume has one. */
  sizeLimitBytes?: number;
}

function limitOf(sizeLimit: unknown): { bytes: bigint; text: string } | undefined {
  if (sizeLimit === undefined || sizeLimit === null) return undefined;
  try {
    const q = parseQuantity(String(sizeLimit));
    const bytes = (q.nanos + 999_999_999n) / 1_000_000_000n;
    return bytes > 0n ? { bytes, text: formatQuantity(q) } : undefined;
  } catch {
    // Beyond int64 bytes: no volume can exceed it.
    return undefined;
  }
}

/** How long a measurement waits after the mount table could not be read. */
const MOUNT_TABLE_RETRY_MS = 10_000;
export class EmptyDirStats {
  readonly #ctx: VolumeManagerContext;
  readonly #periodMs: number;
  readonly #now: () => number;
  readonly #usage = new Map<string, EmptyDirUsage>();
  #last = Number.NEGATIVE_INFINITY;
  /** After the mount table could not be read: no measurement before this time. */
  #retryAt = Number.NEGATIVE_INFINITY;
  #running: Promise<void> | undefined;

  /** `periodMs` 0 disables the measurement, as kubelet's --volume-stats-agg-period 0. */
  constructor(ctx: VolumeManagerContext, opts: { periodMs?: number; now?: () => number } = {}) {
    this.#ctx = ctx;
    this.#periodMs = opts.periodMs ?? VOLUME_STATS_PERIOD_MS;
    this.#now = opts.now ?? Date.now;
  }

  get(key: string): EmptyDirUsage | undefined {
    return this.#usage.get(key);
  }

  /**
   * Starts a measurement when the period is over (every mounted emptyDir) or
   * when a volume was mounted since the last one (just that volume, so a new
   * volume shows its usage without waiting a minute). Never two at once;
   * the reconciler does not wait for it.
   */
  tick(): void {
    if (this.#running || this.#periodMs <= 0 || this.#now() < this.#retryAt) return;
    const due = this.#now() - this.#last >= this.#periodMs;
    const unmeasured = this.#mounted().filter((v) => !this.#usage.has(v.key));
    if (!due && unmeasured.length === 0) return;
    if (due) this.#last = this.#now();
    this.#running = this.measure(due ? undefined : new Set(unmeasured.map((v) => v.key)))
      // measure() handles what it expects; this keeps a bug from becoming an unhandled rejection.
      .catch((err: unknown) =>
        this.#ctx.logger.error({ err: errorMessage(err) }, 'volume usage measurement failed'),
      )
      .finally(() => {
        this.#running = undefined;
      });
  }

  /**
   * The last measurement of every mounted emptyDir (podvol_emptydir_*). Not
   * a volume below which a filesystem does not answer: its usage is not
   * known (/status says why).
   */
  samples(): EmptyDirSample[] {
    return this.#mounted().flatMap((v) => {
      const u = this.#usage.get(v.key);
      if (!u || u.unresponsive) return [];
      return [
        {
          namespace: v.podNamespace,
          pod: v.podName,
          volume: v.volumeName,
          usedBytes: u.usedBytes,
          ...(u.sizeLimitBytes !== undefined ? { sizeLimitBytes: u.sizeLimitBytes } : {}),
        },
      ];
    });
  }

  #mounted() {
    return this.#ctx.asw.all().filter((v) => v.pluginName === emptyDirPluginName && v.state === 'mounted');
  }

  /** Measures every mounted emptyDir now, or only those in `only` (tests call it directly). */
  async measure(only?: Set<string>): Promise<void> {
    const { dsw, host, logger } = this.#ctx;
    const seen = new Set<string>();
    /** The mount table, read once per measurement when the first volume needs it. */
    let table: readonly MountInfo[] | undefined;
    for (const v of this.#mounted()) {
      seen.add(v.key);
      if (only && !only.has(v.key)) continue;
      const desired = dsw.volume(v.key);
      const pod = dsw.pod(v.podUID)?.pod;
      if (!desired || !pod) continue;
      // du would hang on a filesystem below the volume that does not answer: report it instead.
      // One read of the table per measurement, not one per volume: after a set-up of 300 pods each
      // new emptyDir read it again, and under that mount churn the reads failed (no two agreed).
      if (table === undefined) {
        try {
          table = await this.#ctx.freshMountTable();
        } catch (err) {
          // Not again on every pass (each operation's end starts one) while mounts churn.
          this.#retryAt = this.#now() + MOUNT_TABLE_RETRY_MS;
          logger.warn({ err: errorMessage(err) }, 'volume usage not measured: cannot read the mount table');
          return;
        }
      }
      const hung = await host
        .getStatProbe()
        .unresponsiveMounts(table, v.path)
        .catch(() => []);
      if (hung.length > 0) {
        const prev = this.#usage.get(v.key);
        if (!prev?.unresponsive)
          logger.warn(
            { podUID: v.podUID, volume: v.volumeName, err: hung[0]?.message },
            'volume usage not measured',
          );
        this.#usage.set(v.key, {
          usedBytes: prev?.usedBytes ?? 0,
          unresponsive: hung.map((h) => `${h.mountPoint}: ${h.message}`).join('; '),
          measuredAt: this.#now(),
        });
        continue;
      }
      let usedBytes: number;
      try {
        usedBytes = Number((await diskUsage(host.getFs(), v.path)).bytes);
      } catch (err) {
        logger.warn(
          { podUID: v.podUID, volume: v.volumeName, err: errorMessage(err) },
          'volume usage not measured',
        );
        continue;
      }
      const limit = limitOf(desired.spec?.volume?.emptyDir?.sizeLimit);
      const prev = this.#usage.get(v.key);
      const over = limit !== undefined && BigInt(usedBytes) > limit.bytes;
      const exceeded = over
        ? `Usage of EmptyDir volume ${JSON.stringify(v.volumeName)} exceeds the limit ${JSON.stringify(limit.text)}.`
        : undefined;
      if (exceeded && !prev?.exceeded) {
        logger.warn({ podUID: v.podUID, volume: v.volumeName, usedBytes, sizeLimit: limit?.text }, exceeded);
        host.getEventRecorder().eventf(pod, 'Warning', SizeLimitExceeded, exceeded);
      }
      this.#usage.set(v.key, {
        usedBytes,
        ...(limit ? { sizeLimit: limit.text, sizeLimitBytes: Number(limit.bytes) } : {}),
        ...(exceeded ? { exceeded } : {}),
        measuredAt: this.#now(),
      });
    }
    for (const key of this.#usage.keys()) if (!seen.has(key)) this.#usage.delete(key);
  }

  /** Waits for a measurement in progress (tests, shutdown). */
  async settle(): Promise<void> {
    await this.#running;
  }
}
