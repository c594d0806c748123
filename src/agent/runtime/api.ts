// The runtime API's endpoints, as functions from a request to a status and a
// JSON body, so they are tested without a socket:
//   GET  /v1/pods                                  the pods podvol knows
//   GET  /v1/pods/{uid}/volumes?wait=S&for=F       WaitForAttachAndMount / WaitForUnmount
//   GET  /v1/pods/{uid}/containers/{name}/mounts   makeMounts + GetExtraSupplementalGroupsForPod
//   POST /v1/pods/{uid}/terminated                 every container of the pod has stopped
import { isPermanentVolumeReason } from '../../reasons.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import type { PodStatus } from '../volumemanager/status.ts';
import { notFound, RuntimeApiError } from './errors.ts';
import { extraSupplementalGroups, findContainer, makeMounts, type SubPathPreparer } from './mounts.ts';
import type { RuntimeState } from './types.ts';

export interface RuntimeApiOptions {
  state: RuntimeState;
  host: VolumeHost;
  subPaths: SubPathPreparer;
  /**
   * Answers already computed for a pod object (the desired state replaces the
   * object when the pod changes): a runtime asking again for a ready pod gets
   * the same mounts without the subPath checks and mounts being redone (the
   * bind mounts made then are of the objects checked then).
   */
  mountsCache?: WeakMap<object, Map<string, unknown>>;
}

export interface Answer {
  status: number;
  body: unknown;
}

export const MAX_WAIT_SECONDS = 300;

export type WaitFor = 'mounted' | 'unmounted';

/** Parses ?wait= and ?for=; a bad value is a 400 that says what is allowed. */
export function parseWaitQuery(q: URLSearchParams): { waitSeconds: number; for: WaitFor } {
  const rawWait = q.get('wait') ?? '0';
  const waitSeconds = Number(rawWait);
  if (
    rawWait.trim() === '' ||
    !Number.isFinite(waitSeconds) ||
    waitSeconds < 0 ||
    waitSeconds > MAX_WAIT_SECONDS
  ) {
    throw new RuntimeApiError(
      400,
      'BadRequest',
      `wait must be a number of seconds from 0 to ${MAX_WAIT_SECONDS}, got "${rawWait}"`,
    );
  }
  const f = q.get('for') ?? 'mounted';
  if (f !== 'mounted' && f !== 'unmounted') {
    throw new RuntimeApiError(400, 'BadRequest', `for must be mounted or unmounted, got "${f}"`);
  }
  return { waitSeconds, for: f };
}

/** Every volume the pod needs is set up (a mounted volume whose refresh failed still counts). */
export function podReady(status: PodStatus): boolean {
  return status.volumes.every((v) => v.state === 'mounted');
}

function describe(uid: string, status: PodStatus | undefined, ready: boolean) {
  return {
    uid,
    namespace: status?.namespace ?? '',
    name: status?.name ?? '',
    ready,
    volumes: status?.volumes ?? [],
    ...(status?.terminating ? { terminating: status.terminating } : {}),
  };
}

/**
 * Calls `check` now and after every change event of the volume manager (no
 * polling) until it returns an answer, the time is up or the client is gone;
 * then `timedOut()` answers. A change seen while `check` runs is not lost.
 */
async function untilAnswered<T>(
  o: RuntimeApiOptions,
  waitSeconds: number,
  signal: AbortSignal | undefined,
  check: () => T | undefined,
  timedOut: () => T,
): Promise<T> {
  const deadline = performance.now() + waitSeconds * 1000;
  let changed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = o.state.onChange(() => {
    changed = true;
    wake?.();
  });
  try {
    for (;;) {
      changed = false;
      const answer = check();
      if (answer !== undefined) return answer;
      const left = deadline - performance.now();
      if (left <= 0 || signal?.aborted) return timedOut();
      if (changed) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          wake = undefined;
          resolve();
        }
        wake = done;
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  } finally {
    unsubscribe();
  }
}

/**
 * The pods podvol knows; with `namespace` and `name`, only that pod, and with
 * `wait` seconds, waiting (event-driven) until it is known: how the CLI
 * resolves namespace/name for a manifest written just before it was called.
 */
export async function listPods(
  o: RuntimeApiOptions,
  q: URLSearchParams = new URLSearchParams(),
  signal?: AbortSignal,
): Promise<Answer> {
  const namespace = q.get('namespace');
  const name = q.get('name');
  const { waitSeconds } = parseWaitQuery(q);
  const matching = () =>
    o.state
      .pods()
      .filter((p) => (namespace === null || p.namespace === namespace) && (name === null || p.name === name))
      .map((p) => ({
        uid: p.uid,
        namespace: p.namespace,
        name: p.name,
        ready: o.state.desiredPod(p.uid) !== undefined && podReady(p),
        ...(p.terminating ? { terminating: p.terminating } : {}),
      }));
  const answer = (pods: ReturnType<typeof matching>): Answer => ({ status: 200, body: { pods } });
  return untilAnswered(
    o,
    namespace !== null || name !== null ? waitSeconds : 0,
    signal,
    () => {
      const pods = matching();
      return pods.length > 0 ? answer(pods) : undefined;
    },
    () => answer(matching()),
  );
}

/** Volumes of the pod that failed for a reason retrying cannot cure (reasons.ts: permanentVolumeReasons). */
export function permanentlyFailed(status: PodStatus): PodStatus['volumes'] {
  return status.volumes.filter((v) => v.state === 'failed' && isPermanentVolumeReason(v.reason));
}

/**
 * Waits up to `waitSeconds` for the pod's volumes. for=mounted: a pod podvol
 * does not know yet may still appear (a manifest written just before the
 * call), so it is a 404 only when the time is up; a volume that failed for a
 * permanent reason ends the wait at once (422 VolumesFailedPermanently with
 * the volumes and their reasons). for=unmounted: an unknown pod is done.
 * The condition is checked again on every change event of the volume
 * manager (no polling), so the answer leaves as soon as the state changes.
 */
export async function waitVolumes(
  o: RuntimeApiOptions,
  uid: string,
  waitSeconds: number,
  waitFor: WaitFor,
  signal?: AbortSignal,
): Promise<Answer> {
  return untilAnswered(
    o,
    waitSeconds,
    signal,
    () => {
      const status = o.state.podStatus(uid);
      const desired = o.state.desiredPod(uid) !== undefined;
      if (waitFor === 'unmounted') {
        return !desired && !o.state.hasMountedVolumes(uid)
          ? { status: 200, body: describe(uid, status, true) }
          : undefined;
      }
      if (desired && status && podReady(status)) return { status: 200, body: describe(uid, status, true) };
      const failed = desired && status ? permanentlyFailed(status) : [];
      if (status && failed.length > 0) {
        throw new RuntimeApiError(
          422,
          'VolumesFailedPermanently',
          `volumes of pod ${status.namespace}/${status.name} cannot be set up until the pod changes: ${failed
            .map((v) => `${v.name} (${v.reason}: ${v.message})`)
            .join(', ')}`,
          describe(uid, status, false),
        );
      }
      return undefined;
    },
    () => {
      const status = o.state.podStatus(uid);
      if (waitFor === 'mounted' && !status)
        throw notFound('PodNotFound', `pod ${uid} is not known to podvol`);
      return { status: 504, body: describe(uid, status, false) };
    },
  );
}

export async function containerMounts(o: RuntimeApiOptions, uid: string, name: string): Promise<Answer> {
  const desired = o.state.desiredPod(uid);
  if (!desired) {
    throw notFound(
      'PodNotFound',
      o.state.podStatus(uid)
        ? `pod ${uid} is being torn down; its mounts are no longer served`
        : `pod ${uid} is not known to podvol`,
    );
  }
  const { pod, volumes } = desired;
  const found = findContainer(pod, name);
  if (!found) {
    throw notFound(
      'ContainerNotFound',
      `pod ${pod.metadata?.namespace}/${pod.metadata?.name} has no container, init container or ephemeral container "${name}"`,
    );
  }
  const status = o.state.podStatus(uid);
  if (!status || !podReady(status)) {
    const pending = (status?.volumes ?? []).filter((v) => v.state !== 'mounted');
    throw new RuntimeApiError(
      409,
      'VolumesNotReady',
      `volumes of pod ${status?.namespace}/${status?.name} are not ready: ${pending
        .map((v) => `${v.name} (${v.state}${v.reason ? `: ${v.reason}` : ''})`)
        .join(', ')}`,
      { ...describe(uid, status, false) },
    );
  }
  const cached = o.mountsCache?.get(pod)?.get(name);
  if (cached) {
    await o.state.markHandedOff(uid);
    return { status: 200, body: cached };
  }
  const { mounts, imageVolumes } = await makeMounts(o, pod, found, volumes);
  // From here on the runtime may have bind-mounted these sources into a container.
  await o.state.markHandedOff(uid);
  const body = {
    uid,
    namespace: status.namespace,
    name: status.name,
    container: name,
    mounts,
    imageVolumes,
    supplementalGroups: extraSupplementalGroups(pod, volumes),
  };
  if (o.mountsCache) {
    const forPod = o.mountsCache.get(pod) ?? new Map<string, unknown>();
    forPod.set(name, body);
    o.mountsCache.set(pod, forPod);
  }
  return { status: 200, body };
}

export async function podTerminated(o: RuntimeApiOptions, uid: string): Promise<Answer> {
  if (!(await o.state.markTerminated(uid))) {
    throw notFound('PodNotFound', `pod ${uid} is not known to podvol`);
  }
  const status = o.state.podStatus(uid);
  return { status: 200, body: describe(uid, status, !o.state.hasMountedVolumes(uid)) };
}
