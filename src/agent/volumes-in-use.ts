// node.status.volumesInUse for this node (kubelet's VolumeManager.GetVolumesInUse
// written by its node status loop): the attachable volumes that pods here want
// or still have mounted. The attach/detach controller never detaches a volume
// listed there, and kubelet mounts an attachable volume only once it has been
// reported. podvol must be the only writer for its node name: a kubelet
// serving the same node would overwrite the list with its own.
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { type Clock, systemClock, type Timer } from '../clock.ts';
import { errorMessage } from '../errno.ts';
import type { Logger } from '../logger.ts';

export interface VolumesInUseOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  logger: Logger;
  /** The unique names of the attachable volumes desired, still mounted, or still staged. */
  inUse: () => string[] | Promise<string[]>;
  periodMs?: number;
  /** The loop's timer (default the system's). */
  clock?: Clock;
}

export class VolumesInUseReporter {
  readonly #o: Required<VolumesInUseOptions>;
  readonly #core: CoreV1Api;
  #reported = new Set<string>();
  #lastWritten: string | undefined;
  #timer: Timer | undefined;
  #running: Promise<void> | undefined;

  constructor(o: VolumesInUseOptions) {
    this.#o = { periodMs: 1000, clock: systemClock(), ...o };
    this.#core = o.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** What the node status says now, as far as this process wrote it successfully. */
  reported(): ReadonlySet<string> {
    return this.#reported;
  }

  start(): void {
    const loop = () => {
      this.#timer = this.#o.clock.after(this.#o.periodMs, async () => {
        this.#running = this.syncOnce();
        await this.#running;
        if (this.#timer) loop();
      });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#running;
  }

  async syncOnce(): Promise<void> {
    let names: string[];
    try {
      names = await this.#o.inUse();
    } catch (err) {
      // Writing a list that misses a volume could let it be detached: write nothing this pass.
      this.#o.logger.warn({ err: errorMessage(err) }, 'could not list the volumes in use');
      return;
    }
    const want = [...new Set(names)].sort();
    const key = JSON.stringify(want);
    if (key === this.#lastWritten) return;
    try {
      if (this.#lastWritten === undefined) {
        // First pass: leave the node alone when it already says exactly this (nothing to report, usually).
        const node = await this.#core.readNode({ name: this.#o.nodeName });
        if (JSON.stringify([...(node.status?.volumesInUse ?? [])].sort()) === key) {
          this.#lastWritten = key;
          this.#reported = new Set(want);
          return;
        }
      }
      await this.#core.patchNodeStatus(
        { name: this.#o.nodeName, body: { status: { volumesInUse: want.length > 0 ? want : null } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      this.#lastWritten = key;
      this.#reported = new Set(want);
    } catch (err) {
      this.#o.logger.warn({ err: errorMessage(err) }, 'could not update node.status.volumesInUse');
    }
  }
}
