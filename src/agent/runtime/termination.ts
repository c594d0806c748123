// The teardown rule of the runtime contract. A pod that is no longer desired
// (deleted, terminal, its manifest gone) is torn down at once if its mounts
// were never handed to a runtime. Once they were (the mounts endpoint answered
// for it), its volumes are held until the runtime reports `terminated` or the
// pod's grace period runs out: API pods until metadata.deletionTimestamp,
// static pods terminationGracePeriodSeconds (default 30) after the manifest
// disappeared. What was handed off, terminated or is being held is written to
// <root>/podvol/pods/<uid>/runtime.json, so a restart remembers it.
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { type Clock, systemClock } from '../../clock.ts';
import { errorMessage, fieldOf } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { podVolumeRecordsDir, podVolumeRecordsRoot } from '../../volumehost/paths.ts';
import { parseOwnDocument } from '../own-document.ts';
import { CONFIG_SOURCE_ANNOTATION } from '../pods/types.ts';
import type { Terminating } from '../volumemanager/status.ts';

export const DEFAULT_TERMINATION_GRACE_SECONDS = 30;

interface Entry {
  version: 1;
  /** When the mounts endpoint first answered (ms since the epoch). */
  handedOff?: number;
  /** When the runtime said every container stopped; cleared by a new hand-off. */
  terminated?: number;
  /** 'file' or 'api', and the grace period, as last seen while the pod was desired. */
  source?: string;
  graceSeconds?: number;
  /** When the pod stopped being desired, and until when its volumes are held. */
  since?: number;
  deadline?: number;
}

const isStatic = (pod: V1Pod) => pod.metadata?.annotations?.[CONFIG_SOURCE_ANNOTATION] === 'file';

const runtimeFile = (root: string, uid: string) => join(podVolumeRecordsDir(root, uid), 'runtime.json');

export class TerminationGate {
  readonly #root: string;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #entries = new Map<string, Entry>();
  /** UIDs desired in the last filter(): a UID missing from the next one has gone. */
  #desired = new Set<string>();

  constructor(o: { rootDir: string; logger: Logger; clock?: Clock }) {
    this.#root = o.rootDir;
    this.#log = o.logger.child({ component: 'termination' });
    this.#clock = o.clock ?? systemClock();
  }

  /** Reads what a previous process remembered. Call before the first filter(). */
  async load(): Promise<void> {
    let uids: string[] = [];
    try {
      uids = await readdir(podVolumeRecordsRoot(this.#root));
    } catch {}
    for (const uid of uids) {
      try {
        const text = await readFile(runtimeFile(this.#root, uid), 'utf8');
        const e = parseOwnDocument<Entry>(text, (d) => fieldOf(d, 'version') === 1);
        if (e) this.#entries.set(uid, e);
      } catch {}
    }
  }

  /** Writes of one pod's file, one after the other, so the last state wins. */
  readonly #writes = new Map<string, Promise<void>>();

  #save(uid: string, e: Entry): Promise<void> {
    this.#entries.set(uid, e);
    const write = async () => {
      const path = runtimeFile(this.#root, uid);
      await mkdir(podVolumeRecordsDir(this.#root, uid), { recursive: true, mode: 0o750 });
      await writeFile(`${path}.tmp`, JSON.stringify(e), { mode: 0o600 });
      await rename(`${path}.tmp`, path);
    };
    const next = (this.#writes.get(uid) ?? Promise.resolve()).catch(() => {}).then(write);
    this.#writes.set(uid, next);
    void next
      .finally(() => {
        if (this.#writes.get(uid) === next) this.#writes.delete(uid);
      })
      .catch(() => {});
    return next;
  }

  #persist(uid: string, e: Entry): void {
    this.#save(uid, e).catch((err) =>
      this.#log.error({ podUID: uid, err: errorMessage(err) }, 'cannot record termination state'),
    );
  }

  async markHandedOff(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const prev = this.#entries.get(uid);
    const e: Entry = {
      version: 1,
      handedOff: prev?.handedOff ?? this.#clock.now(),
      source: isStatic(pod) ? 'file' : 'api',
      graceSeconds: pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_TERMINATION_GRACE_SECONDS,
    };
    if (
      prev?.handedOff &&
      !prev.terminated &&
      prev.source === e.source &&
      prev.graceSeconds === e.graceSeconds
    )
      return;
    await this.#save(uid, e);
  }

  /** The runtime says every container of the pod stopped; false if podvol never heard of the pod. */
  async markTerminated(uid: string, known: boolean): Promise<boolean> {
    const prev = this.#entries.get(uid);
    if (!prev && !known) return false;
    await this.#save(uid, { ...(prev ?? { version: 1 }), terminated: this.#clock.now() });
    this.#log.info({ podUID: uid }, 'runtime reported the pod terminated');
    return true;
  }

  /**
   * The pods the volume manager should want: a pod being deleted is no longer
   * desired (its volumes are held instead, see held()). Pods that disappeared
   * start their grace period here, so call it only once the sources synced
   * (`synced` false keeps every remembered pod held).
   */
  filter(pods: V1Pod[], synced: boolean): V1Pod[] {
    const now = this.#clock.now();
    const out: V1Pod[] = [];
    const desired = new Set<string>();
    for (const pod of pods) {
      const uid = pod.metadata?.uid ?? '';
      const deletion = pod.metadata?.deletionTimestamp;
      if (deletion === undefined || deletion === null) {
        out.push(pod);
        desired.add(uid);
        const e = this.#entries.get(uid);
        // Desired again (a static pod with an explicit UID put back): nothing is held.
        if (e?.deadline !== undefined) this.#persist(uid, { ...e, since: undefined, deadline: undefined });
        continue;
      }
      this.#startGrace(uid, now, new Date(deletion).getTime());
    }
    if (synced) {
      for (const uid of this.#desired) if (!desired.has(uid)) this.#startGrace(uid, now, undefined);
      for (const [uid, e] of this.#entries) {
        // Remembered from before a restart and not desired any more.
        if (!desired.has(uid) && e.handedOff && e.deadline === undefined && !e.terminated)
          this.#startGrace(uid, now, undefined);
      }
    }
    this.#desired = desired;
    if (synced) {
      // Torn down (or about to be): nothing left to remember in memory.
      for (const uid of [...this.#entries.keys()]) {
        if (!desired.has(uid) && !this.held(uid)) this.#entries.delete(uid);
      }
    }
    return out;
  }

  #startGrace(uid: string, now: number, apiDeadline: number | undefined): void {
    const e = this.#entries.get(uid);
    if (!e?.handedOff || e.terminated || e.deadline !== undefined) return;
    const deadline =
      apiDeadline ??
      (e.source === 'file' ? now + (e.graceSeconds ?? DEFAULT_TERMINATION_GRACE_SECONDS) * 1000 : now);
    this.#log.info(
      { podUID: uid, deadline: new Date(deadline).toISOString() },
      'pod terminating: volumes held until the runtime reports terminated or the grace period ends',
    );
    this.#persist(uid, { ...e, since: now, deadline });
  }

  /** Whether the pod's volumes must stay: handed off, not reported terminated, grace period not over. */
  held(uid: string): Terminating | undefined {
    const e = this.#entries.get(uid);
    if (!e?.handedOff || e.terminated || e.deadline === undefined || e.since === undefined) return undefined;
    const left = e.deadline - this.#clock.now();
    if (left <= 0) return undefined;
    return {
      since: new Date(e.since).toISOString(),
      deadline: new Date(e.deadline).toISOString(),
      secondsLeft: Math.ceil(left / 1000),
    };
  }

  /** Resolves once every state change so far is on disk (stop() waits for it). */
  async flush(): Promise<void> {
    await Promise.all([...this.#writes.values()].map((w) => w.catch(() => {})));
  }

  /** Forgets a pod whose directory is gone (its records go with it). */
  forget(uid: string): void {
    this.#entries.delete(uid);
  }
}
