// Kubernetes Events about pods, recorded the way client-go's tools/record does it for
// kubelet: core/v1 Events named `<pod>.<hex nanotime>`, run through an EventCorrelator
// (aggregate similar events, count identical ones by patching the existing Event, and rate
// limit per object) so a mount retried every few seconds yields one Event with a growing
// count rather than thousands of objects.

import {
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1ObjectReference,
  type V1Pod,
} from '@kubernetes/client-node';
import { type Clock, systemClock } from '../../clock.ts';
import { errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import type { EventRecorder } from '../types.ts';
import { describeKubeError, kubeErrorCode } from './api-errors.ts';

/**
 * The EventRecorder plugins see, plus what the agent needs to shut it down (client-go's
 * broadcaster owns both). eventf queues and never throws; delivery problems are logged and dropped.
 */
export interface EventBroadcaster extends EventRecorder {
  /** Resolves once everything queued so far has been sent (or given up on). */
  flush(): Promise<void>;
  /** Ignore further events; already queued ones still go out (await flush() for them). */
  stop(): void;
}

export interface EventBroadcasterOptions {
  kubeConfig: KubeConfig;
  /** source.component and reportingComponent, e.g. 'podvol'. */
  component: string;
  /** source.host: the node name. */
  host: string;
  /** reportingInstance; client-go uses the host, which is the default here. */
  instance?: string;
  logger?: Logger;
  /** Time, the first retry pause's jitter and the pauses' timers (default the system's). */
  clock?: Clock;
  /** client-go's retry of a post that did not reach the server; tests shorten it. */
  retry?: {
    maxTries?: number;
    sleepMs?: number;
    sleep?: (ms: number) => Promise<void>;
  };
}

// client-go tools/record defaults (events_cache.go, event.go).
const MAX_LRU_CACHE_ENTRIES = 4096;
const AGGREGATE_MAX_EVENTS = 10;
const AGGREGATE_INTERVAL_MS = 600 * 1000;
const SPAM_BURST = 25;
const SPAM_QPS = 1 / 300;
const MAX_QUEUED_EVENTS = 1000;
// recordToSink: a post that did not reach the server is tried 12 times, 10 s apart
// (the first pause randomized so clients do not retry in step after an outage).
const MAX_TRIES_PER_EVENT = 12;
const RETRY_SLEEP_MS = 10_000;

/**
 * operation_executor's simple error for events: `<prefix> failed for volume "<name>" : <err>`
 * (note the space before the colon: Go's "%v for volume %q %v" with suffix ": <err>").
 */
export function volumeErrorMessage(prefix: string, volumeName: string, err: unknown): string {
  const suffix = err === undefined || err === null ? '' : `: ${errorMessage(err)}`;
  return `${prefix} for volume ${JSON.stringify(volumeName)} ${suffix}`;
}

/** metav1.Time serializes as RFC 3339 with whole seconds. */
function wholeSeconds(ms: number): Date {
  return new Date(Math.floor(ms / 1000) * 1000);
}

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A small LRU on Map's insertion order, like groupcache/lru. */
class Lru<V> {
  readonly #max: number;
  readonly #map = new Map<string, V>();
  constructor(max: number) {
    this.#max = max;
  }
  get(key: string): V | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }
  set(key: string, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    if (this.#map.size > this.#max) {
      const oldest = this.#map.keys().next().value;
      if (oldest !== undefined) this.#map.delete(oldest);
    }
  }
}

interface PendingEvent {
  event: CoreV1Event;
}

/** The source and involved object of an event: client-go's spam key, and the start of its other keys. */
function sourceAndObject(e: CoreV1Event): (string | undefined)[] {
  const o = e.involvedObject;
  return [e.source?.component, e.source?.host, o.kind, o.namespace, o.name, o.uid, o.apiVersion];
}

// The keys only ever meet keys built here, so the order of the fields is ours; the set is client-go's.
function eventKey(e: CoreV1Event): string {
  return [...sourceAndObject(e), e.involvedObject.fieldPath, e.type, e.reason, e.message].join('');
}

function spamKey(e: CoreV1Event): string {
  return sourceAndObject(e).join('');
}

function aggregateKeys(e: CoreV1Event): [aggregateKey: string, localKey: string] {
  return [
    [...sourceAndObject(e), e.type, e.reason, e.reportingComponent, e.reportingInstance].join(''),
    e.message ?? '',
  ];
}

interface EventLog {
  count: number;
  firstTimestamp: Date | undefined;
  name: string;
  resourceVersion: string | undefined;
}

interface Correlated {
  event: CoreV1Event;
  key: string;
  /** Strategic-merge patch for an Event we already created; absent for a first occurrence. */
  patch?: { count: number; lastTimestamp: string; message: string };
}

/** client-go's EventCorrelator: aggregate, then count, then rate limit. */
function createCorrelator(now: () => number) {
  const aggregates = new Lru<{ localKeys: Set<string>; lastMs: number }>(MAX_LRU_CACHE_ENTRIES);
  const observations = new Lru<EventLog>(MAX_LRU_CACHE_ENTRIES);
  const buckets = new Lru<{ tokens: number; lastMs: number }>(MAX_LRU_CACHE_ENTRIES);
  let lastNanos = 0n;

  // Event names carry nanoseconds; a ms clock would collide, so keep them strictly rising.
  const nanoName = (objectName: string | undefined, ms: number): string => {
    let nanos = BigInt(Math.trunc(ms)) * 1_000_000n;
    if (nanos <= lastNanos) nanos = lastNanos + 1n;
    lastNanos = nanos;
    return `${objectName}.${nanos.toString(16)}`;
  };

  const aggregate = (e: CoreV1Event): [CoreV1Event, string] => {
    const t = now();
    const [aggKey, localKey] = aggregateKeys(e);
    let rec = aggregates.get(aggKey);
    if (!rec || t - rec.lastMs > AGGREGATE_INTERVAL_MS) rec = { localKeys: new Set(), lastMs: t };
    rec.localKeys.add(localKey);
    rec.lastMs = t;
    aggregates.set(aggKey, rec);
    if (rec.localKeys.size < AGGREGATE_MAX_EVENTS) return [e, eventKey(e)];
    // Do not grow the set beyond the threshold (PopAny).
    const first = rec.localKeys.values().next().value;
    if (first !== undefined) rec.localKeys.delete(first);
    const ts = wholeSeconds(t);
    const combined: CoreV1Event = {
      metadata: { name: nanoName(e.involvedObject.name, t), namespace: e.metadata.namespace },
      count: 1,
      firstTimestamp: ts,
      lastTimestamp: ts,
      involvedObject: e.involvedObject,
      message: `(combined from similar events): ${e.message}`,
      type: e.type,
      reason: e.reason,
      source: e.source,
    };
    return [combined, aggKey];
  };

  const observe = (e: CoreV1Event, key: string): Correlated => {
    const last = observations.get(key);
    const event: CoreV1Event = { ...e, metadata: { ...e.metadata } };
    let patch: Correlated['patch'];
    if (last && last.count > 0) {
      event.metadata.name = last.name;
      event.metadata.resourceVersion = last.resourceVersion;
      event.firstTimestamp = last.firstTimestamp;
      event.count = last.count + 1;
      patch = {
        count: event.count,
        lastTimestamp: rfc3339(event.lastTimestamp ?? wholeSeconds(now())),
        message: event.message ?? '',
      };
    }
    observations.set(key, {
      count: event.count ?? 1,
      firstTimestamp: event.firstTimestamp,
      name: event.metadata.name ?? '',
      resourceVersion: event.metadata.resourceVersion,
    });
    return { event, key, patch };
  };

  // Token bucket per source+object: golang.org/x/time/rate semantics, starting full.
  const spamFiltered = (e: CoreV1Event): boolean => {
    const t = now();
    const key = spamKey(e);
    const b = buckets.get(key) ?? { tokens: SPAM_BURST, lastMs: t };
    b.tokens = Math.min(SPAM_BURST, b.tokens + (Math.max(0, t - b.lastMs) / 1000) * SPAM_QPS);
    b.lastMs = t;
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    buckets.set(key, b);
    return !allowed;
  };

  return {
    nanoName,
    correlate(e: CoreV1Event): Correlated | undefined {
      const [aggregated, key] = aggregate(e);
      const observed = observe(aggregated, key);
      return spamFiltered(observed.event) ? undefined : observed;
    },
    updateState(key: string, server: CoreV1Event): void {
      observations.set(key, {
        count: server.count ?? 1,
        firstTimestamp: server.firstTimestamp,
        name: server.metadata?.name ?? '',
        resourceVersion: server.metadata?.resourceVersion,
      });
    },
  };
}

function podReference(pod: V1Pod): V1ObjectReference {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    namespace: pod.metadata?.namespace,
    name: pod.metadata?.name,
    uid: pod.metadata?.uid,
    resourceVersion: pod.metadata?.resourceVersion,
  };
}

export function createEventBroadcaster(opts: EventBroadcasterOptions): EventBroadcaster {
  const clock = opts.clock ?? systemClock();
  const now = () => clock.now();
  const logger = opts.logger;
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const source = { component: opts.component, host: opts.host };
  const reportingInstance = opts.instance ?? opts.host;
  const correlator = createCorrelator(now);
  let tail: Promise<void> = Promise.resolve();
  let queued = 0;
  let stopped = false;

  // Fields that identify the event in logs; the message is a kubelet error string, never object content.
  const describe = (e: CoreV1Event) => ({
    namespace: e.metadata.namespace,
    pod: e.involvedObject.name,
    type: e.type,
    reason: e.reason,
  });

  const create = (e: CoreV1Event): Promise<CoreV1Event> => {
    const body: CoreV1Event = { ...e, metadata: { ...e.metadata, resourceVersion: undefined } };
    return core.createNamespacedEvent({ namespace: e.metadata.namespace ?? 'default', body });
  };

  const maxTries = opts.retry?.maxTries ?? MAX_TRIES_PER_EVENT;
  const sleepMs = opts.retry?.sleepMs ?? RETRY_SLEEP_MS;
  // Stopping cuts a pause short, so a dead API server cannot hold up shutdown for two minutes.
  let wake: (() => void) | undefined;
  const sleep =
    opts.retry?.sleep ??
    ((ms: number) =>
      new Promise<void>((resolve) => {
        if (stopped) return resolve();
        const timer = clock.after(ms, resolve);
        wake = () => {
          timer.cancel();
          resolve();
        };
      }));

  /**
   * client-go's recordEvent: true when done (sent, or refused by the server: a
   * status error never gets better by retrying), false when worth another try
   * (the request did not get an answer).
   */
  const recordEvent = async (key: string, e: CoreV1Event, patch: Correlated['patch']): Promise<boolean> => {
    const namespace = e.metadata.namespace ?? 'default';
    try {
      let saved: CoreV1Event;
      if (patch) {
        try {
          saved = await core.patchNamespacedEvent(
            { name: e.metadata.name ?? '', namespace, body: patch },
            setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
          );
        } catch (err) {
          // The Event may have expired (events have a TTL) or never been created: recreate it.
          if (kubeErrorCode(err) !== 404) throw err;
          saved = await create(e);
        }
      } else {
        saved = await create(e);
      }
      correlator.updateState(key, saved);
      return true;
    } catch (err) {
      const fields = { ...describe(e), err: describeKubeError(err) };
      const code = kubeErrorCode(err);
      if (code === 409) {
        logger?.debug(fields, 'Server rejected event (will not retry!)');
        return true;
      }
      if (code !== undefined) {
        logger?.warn(fields, 'Server rejected event (will not retry!)');
        return true;
      }
      logger?.warn(fields, 'Unable to write event (may retry after sleeping)');
      return false;
    }
  };

  const send = async ({ event }: PendingEvent): Promise<void> => {
    const result = correlator.correlate(event);
    if (!result) {
      logger?.debug(describe(event), 'Event rate limited for this object, dropped');
      return;
    }
    for (let tries = 1; ; tries++) {
      if (await recordEvent(result.key, result.event, result.patch)) return;
      if (tries >= maxTries) {
        logger?.error(describe(result.event), 'Unable to write event (retry limit exceeded!)');
        return;
      }
      if (stopped) {
        logger?.warn(describe(result.event), 'Unable to write event (stopping, dropped)');
        return;
      }
      await sleep(tries === 1 ? sleepMs * clock.random() : sleepMs);
    }
  };

  return {
    eventf(pod, type, reason, message) {
      try {
        if (stopped) return;
        if (type !== 'Normal' && type !== 'Warning') {
          logger?.error({ type }, 'Unsupported event type');
          return;
        }
        if (queued >= MAX_QUEUED_EVENTS) {
          logger?.error(
            { pod: pod.metadata?.name, reason },
            'Unable to record event: too many queued events, dropped event',
          );
          return;
        }
        const ms = now();
        const ts = wholeSeconds(ms);
        const ref = podReference(pod);
        const event: CoreV1Event = {
          metadata: { name: correlator.nanoName(ref.name, ms), namespace: ref.namespace || 'default' },
          involvedObject: ref,
          reason,
          message,
          firstTimestamp: ts,
          lastTimestamp: ts,
          count: 1,
          type,
          source,
          reportingComponent: source.component,
          reportingInstance,
        };
        queued++;
        tail = tail
          .then(() => send({ event }))
          .catch(() => {})
          .finally(() => {
            queued--;
          });
      } catch (err) {
        logger?.error({ err: errorMessage(err) }, 'Unable to record event');
      }
    },

    flush() {
      return tail;
    },

    stop() {
      stopped = true;
      wake?.();
    },
  };
}
