// kubelet's desiredStateOfWorldPopulator: turns the pod sources into the desired
// state when they changed, and marks remount-requiring volumes (tokens,
// downwardAPI, configMaps...) for a refresh every sync period.
import type { V1Pod } from '@kubernetes/client-node';
import type { ClaimLookup } from '../../volumehost/kube/claims.ts';
import { isNodeExpandable } from '../../volumehost/volume.ts';
import type { MountedVolume } from './actual-state.ts';
import { claimNameOf } from './claims.ts';
import type { VolumeManagerContext } from './context.ts';
import { adoptReconstructedVolumes } from './reconstruction.ts';

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
  /** The last claim-problem Event message per pod, so each message is posted once. */
  readonly #claimEvents = new Map<string, string>();

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
    this.#ctx.asw.markRemountRequired(predicate);
  }

  /**
   * A pod whose claims cannot be processed gets kubelet's Warning FailedMount
   * ("Unable to attach or mount volumes: unmounted volumes=[...], unattached
   * volumes=[...], failed to process volumes=[...]: error processing PVC ...").
   */
  #reportClaimProblems(): void {
    const { dsw, asw, host } = this.#ctx;
    const seen = new Set<string>();
    for (const p of dsw.pods()) {
      seen.add(p.uid);
      const vols = [...p.volumes.values()];
      // Not while the first list of a claim or volume is still on its way: kubelet would have done a GET.
      const failed = vols.filter(
        (v) =>
          v.waitsForClaim &&
          v.problem &&
          v.problem.reason !== 'ClaimLookupPending' &&
          v.problem.reason !== 'VolumeLookupPending',
      );
      if (failed.length === 0) {
        this.#claimEvents.delete(p.uid);
        continue;
      }
      const notMounted = vols
        .filter((v) => asw.get(v.key)?.state !== 'mounted')
        .map((v) => v.volumeName)
        .sort();
      const names = failed.map((v) => v.volumeName).sort();
      const message = `Unable to attach or mount volumes: unmounted volumes=[${notMounted.join(' ')}], unattached volumes=[${notMounted.join(' ')}], failed to process volumes=[${names.join(' ')}]: ${failed.map((v) => v.problem?.message).join(', ')}`;
      if (this.#claimEvents.get(p.uid) === message) continue;
      this.#claimEvents.set(p.uid, message);
      // The Event is logged only at debug; nothing else says this in the log.
      this.#ctx.logger.warn(
        { pod: `${p.pod.metadata?.namespace}/${p.pod.metadata?.name}`, podUID: p.uid, reason: 'FailedMount' },
        message,
      );
      host.getEventRecorder().eventf(p.pod, 'Warning', 'FailedMount', message);
    }
    for (const uid of this.#claimEvents.keys()) if (!seen.has(uid)) this.#claimEvents.delete(uid);
  }

  /**
   * kubelet's online expansion trigger: a mounted volume whose claim's
   * status.allocatedResourceStatuses.storage says NodeResizePending or
   * NodeResizeInProgress is grown by its plugin while the pod runs (the plugin
   * checks the sizes and updates the claim). Claims come from the watches, so
   * this runs when a claim changes; a claim that did not change since the last
   * attempt (a driver that refused with FailedPrecondition) is not tried again.
   */
  #markResizeRequired(): void {
    const claims = this.#o.claims;
    if (!claims) return;
    const { asw, pluginMgr } = this.#ctx;
    for (const v of asw.all()) {
      if (v.state !== 'mounted' || !v.spec.persistentVolume || !v.spec.volume) continue;
      const plugin = pluginMgr.findPluginByName(v.pluginName);
      if (!isNodeExpandable(plugin)) continue;
      const name = claimNameOf({ metadata: { name: v.podName } }, v.spec.volume);
      if (!name) continue;
      const claim = claims.claim(v.podNamespace, name).object;
      const status = claim?.status?.allocatedResourceStatuses?.storage;
      if (status !== 'NodeResizePending' && status !== 'NodeResizeInProgress') continue;
      const rv = claim?.metadata?.resourceVersion ?? '';
      if (v.resizeSeen !== rv) asw.markFSResizeRequired(v.key, rv);
    }
  }

  /** One populator pass, run at the start of every reconciler pass. True when the desired state was rebuilt. */
  populate(): boolean {
    const { dsw, asw, pluginMgr, host } = this.#ctx;
    const rebuilt = this.#podsDirty;
    if (this.#podsDirty) {
      this.#podsDirty = false;
      const changed = dsw.replace(this.#o.pods(), pluginMgr, host, this.#o.claims);
      adoptReconstructedVolumes(this.#ctx);
      this.#markResizeRequired();
      for (const uid of changed) {
        asw.markRemountRequired((v) => dsw.volume(v.key)?.requiresRemount ?? false, uid);
      }
      this.#reportClaimProblems();
    }
    if (this.#o.now() - this.#lastResync >= this.#o.resyncPeriodMs) {
      this.#lastResync = this.#o.now();
      this.markRemountRequired((v) => v.state === 'mounted' && (dsw.volume(v.key)?.requiresRemount ?? false));
    }
    return rebuilt;
  }
}
