// A guard kubelet lacks: right after a start, a first sync that would tear down
// most of the volumes podvol just adopted from disk is far more likely a
// configuration mistake (a wrong --node-name, a wrong kubeconfig, an empty
// manifest directory) than every pod having gone while podvol was down. Such a
// teardown is held for a settle period, and re-checked against the sources as
// they are then before anything is unmounted. The guard disarms for good after
// the first pass that may unmount (held or not).
import type { Logger } from '../../logger.ts';
import type { MountedVolume } from './actual-state.ts';

export interface TeardownHold {
  /** When the hold started and when it is re-checked (ms since the epoch). */
  since: number;
  until: number;
  /** Adopted volumes the sources would tear down, and all adopted volumes. */
  toTearDown: number;
  adopted: number;
}

export class SettleGuard {
  readonly #settleMs: number;
  readonly #now: () => number;
  readonly #logger: Logger;
  #armed = true;
  #hold: TeardownHold | undefined;

  constructor(o: { settleMs: number; now: () => number; logger: Logger }) {
    this.#settleMs = o.settleMs;
    this.#now = o.now;
    this.#logger = o.logger;
  }

  /**
   * Whether the unmounts of this pass may start. `all` is the actual state,
   * `toUnmount` what the reconciler would tear down now.
   */
  allow(all: readonly MountedVolume[], toUnmount: readonly MountedVolume[]): boolean {
    // A settle period of 0 disables the guard (drain, or an operator's explicit choice).
    if (!this.#armed || this.#settleMs <= 0) return true;
    const adopted = all.filter((v) => v.reconstructed).length;
    const toTearDown = toUnmount.filter((v) => v.reconstructed).length;
    const most = adopted > 0 && toTearDown * 2 > adopted;
    const now = this.#now();
    if (!most) {
      if (this.#hold) {
        this.#logger.info(
          { adopted, toTearDown },
          'teardown hold released: the pod sources want the adopted volumes again',
        );
      }
      this.#disarm();
      return true;
    }
    if (!this.#hold) {
      this.#hold = { since: now, until: now + this.#settleMs, toTearDown, adopted };
      if (this.#settleMs > 0) {
        this.#logger.warn(
          { adopted, toTearDown, settleSeconds: this.#settleMs / 1000 },
          `the first sync would tear down ${toTearDown} of ${adopted} volumes adopted at start; holding every teardown for the settle period, then checking again (a wrong --node-name, --kubeconfig or --pod-manifest-path?)`,
        );
      }
    }
    this.#hold.toTearDown = toTearDown;
    this.#hold.adopted = adopted;
    if (now < this.#hold.until) return false;
    this.#logger.warn(
      { adopted, toTearDown },
      `after the settle period the sources still want ${toTearDown} of ${adopted} adopted volumes torn down; tearing them down`,
    );
    this.#disarm();
    return true;
  }

  /** The hold in force, for /status. */
  hold(): TeardownHold | undefined {
    return this.#hold;
  }

  #disarm(): void {
    this.#armed = false;
    this.#hold = undefined;
  }
}
