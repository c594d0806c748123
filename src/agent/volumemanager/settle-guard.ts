// A guard kubelet lacks: right after a start, a first sync that would tear down
// most of the volumes podvol just adopted from disk may be a configuration
// mistake (a wrong --kubeconfig, a wrong or empty --pod-manifest-path, a
// manifest disk not mounted yet) rather than every pod having gone while podvol
// was down. Such a teardown is held for a settle period, and re-checked against
// the sources as they are then before anything is unmounted. The guard disarms
// for good after the first pass that may unmount (held or not).
//
// What tells a mistake from a rollout is what the sources deliver, not what
// they no longer want: a rollout replaces pods (4 static pods swapped for 4 new
// ones while podvol was down wants all 4 adopted pods' volumes gone, and that is
// ordinary churn), a mistake loses them (a source that reads nothing, or only a
// fraction of what it had). So a teardown is held only when it would take most
// adopted volumes AND the sources deliver fewer pods than half the adopted pods
// (0 included). A still-desired adopted pod does not lift the hold: with two
// sources one can be right (static pods survive) while the other delivers
// nothing (a kubeconfig for another cluster). Holding a legitimate scale-down
// costs a settle period of delay; missing a mistake costs the data.
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

/** What the guard weighs: adopted volumes and pods, the adopted volumes to go, the pods the sources deliver. */
export type SettleCounts = {
  adopted: number;
  toTearDown: number;
  adoptedPods: number;
  desiredPods: number;
};

/** The rule (see the header): most adopted volumes would go and the sources deliver under half the adopted pods. */
export function looksLikeMistake(c: SettleCounts): boolean {
  const most = c.adopted > 0 && c.toTearDown * 2 > c.adopted;
  return most && c.desiredPods * 2 < c.adoptedPods;
}

export function settleCounts(
  all: readonly MountedVolume[],
  toUnmount: readonly MountedVolume[],
  desiredPods: number,
): SettleCounts {
  const adopted = all.filter((v) => v.reconstructed);
  return {
    adopted: adopted.length,
    toTearDown: toUnmount.filter((v) => v.reconstructed).length,
    adoptedPods: new Set(adopted.map((v) => v.podUID)).size,
    desiredPods,
  };
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
   * `toUnmount` what the reconciler would tear down now, `desiredPods` how many
   * pods the sources deliver (with or without volumes).
   */
  allow(all: readonly MountedVolume[], toUnmount: readonly MountedVolume[], desiredPods: number): boolean {
    // A settle period of 0 disables the guard (drain, or an operator's explicit choice).
    if (!this.#armed || this.#settleMs <= 0) return true;
    const counts = settleCounts(all, toUnmount, desiredPods);
    const { adopted, toTearDown } = counts;
    const now = this.#now();
    if (!looksLikeMistake(counts)) {
      if (this.#hold) {
        this.#logger.info(
          counts,
          toTearDown * 2 > adopted
            ? `teardown hold released: the pod sources deliver ${desiredPods} pods again; tearing down the ${toTearDown} adopted volumes they no longer want`
            : 'teardown hold released: the pod sources want the adopted volumes again',
        );
      }
      this.#disarm();
      return true;
    }
    if (!this.#hold) {
      this.#hold = { since: now, until: now + this.#settleMs, toTearDown, adopted };
      this.#logger.warn(
        { ...counts, settleSeconds: this.#settleMs / 1000 },
        `the first sync would tear down ${toTearDown} of ${adopted} volumes adopted at start and the pod sources deliver ${desiredPods} pods for ${counts.adoptedPods} adopted; holding every teardown for the settle period, then checking again (a wrong --node-name, --kubeconfig or --pod-manifest-path?)`,
      );
    }
    this.#hold.toTearDown = toTearDown;
    this.#hold.adopted = adopted;
    if (now < this.#hold.until) return false;
    this.#logger.warn(
      counts,
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
