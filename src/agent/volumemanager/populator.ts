// kubelet's desiredStateOfWorldPopulator: turns the pod sources into the desired
// state when they changed, and marks remount-requiring volumes (tokens,
// downwardAPI, configMaps...) for a refresh every sync period.
import type { V1Pod } from '@kubernetes/client-node';
import type { MountedVolume } from './actual-state.ts';
import type { ClaimLookup } from './claims.ts';
import type { VolumeManagerContext } from './context.ts';

export interface PopulatorOptions {
  /** Current pods of every source, merged and unique by UID. */
  pods: () => V1Pod[];
  /** kubelet's syncFrequency. */
  resyncPeriodMs: number;
  now: () => number;
  /** PersistentVolumeClaims and PersistentVolumes (cluster mode). */
  claims?: ClaimLookup;
}

export class DesiredStateOfWorldPopulator {
  readonly #ctx: VolumeManagerContext;
  readonly #o: PopulatorOptions;
  #podsDirty = true;
  #lastResync = 0;

  constructor(ctx: VolumeManagerContext, opts: PopulatorOptions) {
    this.#ctx = ctx;
    this.#o = opts;
  }

  /** The pod sources changed; the next pass re-reads them. */
  podsChanged(): void {
    this.#podsDirty = true;
  }

  /** An object a remount-requiring volume renders changed (e.g. a configMap): refresh those volumes. */
  markRemountRequired(predicate: (v: MountedVolume) => boolean): void {
    for (const v of this.#ctx.asw.all()) if (predicate(v)) v.remountRequired = true;
  }

  /** One populator pass, run at the start of every reconciler pass. */
  populate(): void {
    const { dsw, asw, pluginMgr, host } = this.#ctx;
    if (this.#podsDirty) {
      this.#podsDirty = false;
      const changed = dsw.replace(this.#o.pods(), pluginMgr, host, this.#o.claims);
      for (const uid of changed) {
        asw.markRemountRequired(uid, (v) => dsw.volume(v.key)?.requiresRemount ?? false);
      }
    }
    if (this.#o.now() - this.#lastResync >= this.#o.resyncPeriodMs) {
      this.#lastResync = this.#o.now();
      this.markRemountRequired((v) => v.state === 'mounted' && (dsw.volume(v.key)?.requiresRemount ?? false));
    }
  }
}
