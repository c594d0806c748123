import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { systemClock } from '../../../src/clock.ts';
import {
  createEventBroadcaster,
  type EventBroadcaster,
  volumeErrorMessage,
} from '../../../src/volumehost/kube/events.ts';
import type { KubeObj, TestApiServer } from '../../apiserver/server.ts';
import { recordingLogger } from '../../helpers/logger.ts';
import { at, must, only } from '../../helpers/must.ts';
import { kubeEnv, waitFor } from './env.ts';

const T0 = Date.UTC(2030, 4, 6, 7, 8, 9, 123);

interface Env {
  api: TestApiServer;
  rec: EventBroadcaster;
  pod: V1Pod;
  advance(ms: number): void;
  logs: { level: string; obj: object; msg: string }[];
  events(): KubeObj[];
}

async function setup(
  t: TestContext,
  retry?: { maxTries?: number; sleepMs?: number; sleep?: (ms: number) => Promise<void> },
): Promise<Env> {
  const { api, kc } = await kubeEnv(t);
  const pod = api.store.create('pods', {
    metadata: { name: 'web-0', namespace: 'shop' },
    spec: { nodeName: 'node-a', containers: [{ name: 'c', image: 'busybox' }] },
  }) as V1Pod;
  let clock = T0;
  const logs: Env['logs'] = [];
  const logger = recordingLogger((level, obj, msg) => logs.push({ level, obj, msg: msg ?? '' }));
  const rec = createEventBroadcaster({
    kubeConfig: kc,
    component: 'podvol',
    host: 'node-a',
    instance: 'podvol-node-a',
    logger,
    clock: { ...systemClock(), now: () => clock },
    retry: retry ?? { sleep: async () => {} },
  });
  t.after(async () => {
    rec.stop();
    await rec.flush();
  });
  return {
    api,
    rec,
    pod,
    logs,
    advance: (ms) => {
      clock += ms;
    },
    events: () => api.store.list('events', 'shop'),
  };
}

const seconds = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

describe('event messages', () => {
  test('FailedMount uses operation_executor wording, space before the colon', () => {
    assert.equal(
      volumeErrorMessage('MountVolume.SetUp failed', 'cfg', new Error('configmap "app" not found')),
      'MountVolume.SetUp failed for volume "cfg" : configmap "app" not found',
    );
    assert.equal(
      volumeErrorMessage('UnmountVolume.TearDown failed', 'data', 'busy'),
      'UnmountVolume.TearDown failed for volume "data" : busy',
    );
  });
});

describe('event recorder against an API server', () => {
  test('creates a core/v1 Event shaped like client-go record', async (t) => {
    const env = await setup(t);
    const message = volumeErrorMessage(
      'MountVolume.SetUp failed',
      'cfg',
      new Error('configmap "app" not found'),
    );
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', message);
    await env.rec.flush();

    const ev = only(env.events());
    assert.equal(ev.metadata.name, `web-0.${(BigInt(T0) * 1_000_000n).toString(16)}`);
    assert.equal(ev.metadata.namespace, 'shop');
    assert.deepEqual(ev.involvedObject, {
      kind: 'Pod',
      apiVersion: 'v1',
      namespace: 'shop',
      name: 'web-0',
      uid: env.pod.metadata?.uid,
      resourceVersion: env.pod.metadata?.resourceVersion,
    });
    assert.deepEqual(ev.source, { component: 'podvol', host: 'node-a' });
    assert.equal(ev.reportingComponent, 'podvol');
    assert.equal(ev.reportingInstance, 'podvol-node-a');
    assert.equal(ev.type, 'Warning');
    assert.equal(ev.reason, 'FailedMount');
    assert.equal(ev.message, message);
    assert.equal(ev.count, 1);
    assert.equal(new Date(ev.firstTimestamp as string).toISOString(), new Date(seconds(T0)).toISOString());
    assert.equal(ev.lastTimestamp, ev.firstTimestamp);
    // client-go's legacy recorder leaves eventTime unset (and so skips the events.k8s.io validation).
    assert.equal(ev.eventTime ?? null, null);
  });

  test('repeats of the same event update one Event: count and lastTimestamp grow', async (t) => {
    const env = await setup(t);
    const message = volumeErrorMessage(
      'MountVolume.SetUp failed',
      'secret-vol',
      new Error('secret "db" not found'),
    );
    for (let i = 0; i < 3; i++) {
      env.rec.eventf(env.pod, 'Warning', 'FailedMount', message);
      env.advance(10_000);
    }
    await env.rec.flush();

    const ev = only(env.events());
    assert.equal(ev.count, 3);
    assert.equal(new Date(ev.firstTimestamp as string).getTime(), new Date(seconds(T0)).getTime());
    assert.equal(new Date(ev.lastTimestamp as string).getTime(), new Date(seconds(T0 + 20_000)).getTime());
    const verbs = env.api.hooks.requests
      .filter((r) => r.resource === 'events')
      .map((r) => `${r.verb} ${r.code}`);
    assert.deepEqual(verbs, ['create 201', 'patch 200', 'patch 200']);
  });

  test('different messages are different Events', async (t) => {
    const env = await setup(t);
    env.rec.eventf(
      env.pod,
      'Warning',
      'FailedMount',
      volumeErrorMessage('MountVolume.SetUp failed', 'a', 'x'),
    );
    env.rec.eventf(
      env.pod,
      'Warning',
      'FailedMount',
      volumeErrorMessage('MountVolume.SetUp failed', 'b', 'x'),
    );
    env.rec.eventf(env.pod, 'Normal', 'SuccessfulMountVolume', 'MountVolume.SetUp succeeded for volume "a"');
    await env.rec.flush();
    assert.equal(env.events().length, 3);
    assert.equal(new Set(env.events().map((e) => e.metadata.name)).size, 3);
  });

  test('an Event deleted on the server is recreated under its name with the running count', async (t) => {
    const env = await setup(t);
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'boom');
    await env.rec.flush();
    const first = only(env.events());
    env.api.store.delete('events', 'shop', must(first.metadata.name, 'Event name'));
    env.advance(5000);
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'boom');
    await env.rec.flush();
    const again = only(env.events());
    assert.equal(again.metadata.name, first.metadata.name);
    assert.equal(again.count, 2);
  });

  test('similar events with ever-changing messages are combined after ten', async (t) => {
    const env = await setup(t);
    for (let i = 1; i <= 11; i++) {
      env.rec.eventf(env.pod, 'Warning', 'FailedMount', `attempt ${i} failed`);
      env.advance(1000);
    }
    await env.rec.flush();
    const evs = env.events();
    const combined = evs.filter((e) => String(e.message).startsWith('(combined from similar events): '));
    assert.equal(evs.length, 10);
    const ev = only(combined, 'combined Event');
    assert.equal(ev.message, '(combined from similar events): attempt 11 failed');
    assert.equal(ev.count, 2);
  });

  test('a source may burst 25 events about one pod, then one per 5 minutes', async (t) => {
    const env = await setup(t);
    for (let i = 0; i < 30; i++) env.rec.eventf(env.pod, 'Normal', `Reason${i}`, 'm');
    await env.rec.flush();
    assert.equal(env.events().length, 25);
    env.advance(300_000);
    env.rec.eventf(env.pod, 'Normal', 'Later', 'm');
    env.rec.eventf(env.pod, 'Normal', 'TooSoon', 'm');
    await env.rec.flush();
    const reasons = env.events().map((e) => e.reason);
    assert.equal(reasons.length, 26);
    assert.ok(reasons.includes('Later'));
    assert.ok(!reasons.includes('TooSoon'));
  });

  test('a refused post is logged and dropped; eventf never throws', async (t) => {
    const env = await setup(t);
    env.api.hooks.forbid({ resource: 'events' });
    assert.doesNotThrow(() =>
      env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'secret stuff stays out of logs'),
    );
    await env.rec.flush();
    assert.equal(env.events().length, 0);
    const warn = env.logs.find((l) => l.level === 'warn');
    assert.ok(warn);
    assert.match(JSON.stringify(warn.obj), /forbidden/);
    assert.doesNotMatch(JSON.stringify(env.logs), /secret stuff/);
  });

  test('an unreachable API server does not break the caller; the post is retried 12 times, then dropped', async (t) => {
    const pauses: number[] = [];
    const env = await setup(t, {
      sleep: async (ms) => {
        pauses.push(ms);
      },
    });
    await env.api.hooks.down();
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'x');
    await env.rec.flush();
    assert.equal(
      env.logs.filter((l) => l.msg === 'Unable to write event (may retry after sleeping)').length,
      12,
    );
    assert.equal(env.logs.filter((l) => l.msg === 'Unable to write event (retry limit exceeded!)').length, 1);
    // client-go: the first pause is randomized within 10 s, the others are 10 s.
    assert.equal(pauses.length, 11);
    assert.ok(at(pauses, 0) >= 0 && at(pauses, 0) <= 10_000);
    assert.deepEqual(pauses.slice(1), Array(10).fill(10_000));
    await env.api.hooks.up();
  });

  test('a post that failed because the API server was down arrives once it is back', async (t) => {
    let env: Env | undefined;
    env = await setup(t, {
      sleep: async () => {
        await env?.api.hooks.up();
      },
    });
    await env.api.hooks.down();
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'MountVolume.SetUp failed for volume "x" : boom');
    await env.rec.flush();
    assert.equal(only(env.events()).message, 'MountVolume.SetUp failed for volume "x" : boom');
  });

  test('stop() cuts a retry pause short, so shutdown is not held up by a dead API server', async (t) => {
    const env = await setup(t, { sleepMs: 3_600_000 });
    await env.api.hooks.down();
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'x');
    await waitFor('a failed post', () =>
      env.logs.some((l) => l.msg === 'Unable to write event (may retry after sleeping)'),
    );
    env.rec.stop();
    await env.rec.flush();
    assert.ok(env.logs.some((l) => l.msg === 'Unable to write event (stopping, dropped)'));
    await env.api.hooks.up();
  });

  test('after stop() new events are ignored', async (t) => {
    const env = await setup(t);
    env.rec.stop();
    env.rec.eventf(env.pod, 'Warning', 'FailedMount', 'x');
    await env.rec.flush();
    assert.equal(env.events().length, 0);
  });
});
