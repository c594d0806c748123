import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import type { AuthenticationV1TokenRequest } from '@kubernetes/client-node';
import { systemClock } from '../../../src/clock.ts';
import type { Logger } from '../../../src/logger.ts';
import {
  createStandaloneTokenManager,
  createTokenManager,
  requiresRefresh,
  STANDALONE_TOKEN_MANAGER_ERROR,
  type TokenManager,
  tokenCacheKey,
} from '../../../src/volumehost/kube/token-manager.ts';
import type { TestApiServer } from '../../apiserver/server.ts';
import { recordingLogger } from '../../helpers/logger.ts';
import { at, must } from '../../helpers/must.ts';
import { kubeEnv } from './env.ts';

const HOUR = 3600 * 1000;
const T0 = Date.UTC(2030, 0, 1);

function issued(iatMs: number, expirationSeconds: number): AuthenticationV1TokenRequest {
  return {
    spec: { audiences: [], expirationSeconds },
    status: { token: 'x', expirationTimestamp: new Date(iatMs + expirationSeconds * 1000) },
  };
}

describe('requiresRefresh (kubelet rules)', () => {
  const oneHour = issued(T0, 3600);

  test('a fresh token is kept', () => {
    assert.equal(requiresRefresh(oneHour, T0 + 10 * 60 * 1000, 0), false);
  });

  test('refreshes once 80 % of the TTL has passed', () => {
    assert.equal(requiresRefresh(oneHour, T0 + 0.8 * HOUR, 0), false);
    assert.equal(requiresRefresh(oneHour, T0 + 0.8 * HOUR + 1, 0), true);
  });

  test('jitter moves the 80 % point earlier', () => {
    const justBefore = T0 + 0.8 * HOUR - 5000;
    assert.equal(requiresRefresh(oneHour, justBefore, 0), false);
    assert.equal(requiresRefresh(oneHour, justBefore, 9000), true);
  });

  test('a long-lived token is refreshed after 24 h even far from expiry', () => {
    const week = issued(T0, 7 * 24 * 3600);
    assert.equal(requiresRefresh(week, T0 + 24 * HOUR, 0), false);
    assert.equal(requiresRefresh(week, T0 + 24 * HOUR + 1, 0), true);
    assert.equal(requiresRefresh(week, T0 + 24 * HOUR - 5000, 9000), true);
  });

  test('a clock that went backwards before the issue time forces a refresh', () => {
    assert.equal(requiresRefresh(oneHour, T0 - 1, 0), true);
  });

  test('a token without expirationSeconds is never refreshed', () => {
    const tr: AuthenticationV1TokenRequest = {
      spec: { audiences: [] },
      status: { token: 'x', expirationTimestamp: new Date(T0) },
    };
    assert.equal(requiresRefresh(tr, T0 + 100 * HOUR, 0), false);
  });
});

describe('tokenCacheKey', () => {
  test('is kubelet-shaped and never contains the token', () => {
    const tr: AuthenticationV1TokenRequest = {
      spec: {
        audiences: ['vault', 'api'],
        expirationSeconds: 600,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'web-0', uid: 'u-1' },
      },
      status: { token: 'SECRET-TOKEN', expirationTimestamp: new Date(T0) },
    };
    const key = tokenCacheKey('default', 'ns1', tr);
    assert.equal(
      key,
      '"default"/"ns1"/[]string{"vault", "api"}/600/' +
        'v1.BoundObjectReference{Kind:"Pod", APIVersion:"v1", Name:"web-0", UID:"u-1"}',
    );
    assert.ok(!key.includes('SECRET'));
  });

  test('differs by audience, lifetime and bound pod', () => {
    const base = (aud: string[] | undefined, exp: number, uid: string) =>
      tokenCacheKey('sa', 'ns', {
        spec: { audiences: aud as string[], expirationSeconds: exp, boundObjectRef: { uid } },
      });
    const keys = new Set([
      base(['a'], 600, 'u'),
      base(['b'], 600, 'u'),
      base(undefined, 600, 'u'),
      base(['a'], 3600, 'u'),
      base(['a'], 600, 'v'),
    ]);
    assert.equal(keys.size, 5);
  });
});

interface LogLine {
  level: string;
  obj: object;
  msg: string;
}

function loggerWithLines(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return Object.assign(
    recordingLogger((level, obj, msg) => lines.push({ level, obj, msg: msg ?? '' })),
    { lines },
  );
}

interface Env {
  api: TestApiServer;
  tm: TokenManager;
  /** Moves the manager's clock; the API server keeps real time, like a real cluster. */
  advance(ms: number): void;
  logger: ReturnType<typeof loggerWithLines>;
  podUID: string;
  request(podName?: string, podUID?: string): AuthenticationV1TokenRequest;
}

async function setup(t: TestContext): Promise<Env> {
  const { api, kc } = await kubeEnv(t);
  api.store.create('serviceaccounts', { metadata: { name: 'builder', namespace: 'ci' } });
  const pod = api.store.create('pods', {
    metadata: { name: 'job-1', namespace: 'ci' },
    spec: { serviceAccountName: 'builder', containers: [{ name: 'c', image: 'busybox' }] },
  });
  let offset = 0;
  const logger = loggerWithLines();
  // random() = 0 means no jitter, so refresh points are exact.
  const tm = createTokenManager({
    kubeConfig: kc,
    clock: { ...systemClock(), now: () => Date.now() + offset, random: () => 0 },
    logger,
  });
  t.after(async () => {
    tm.stop();
  });
  const podUID = must(pod.metadata.uid, 'uid');
  return {
    api,
    tm,
    logger,
    podUID,
    advance: (ms) => {
      offset += ms;
    },
    request: (podName = 'job-1', uid = podUID) => ({
      spec: {
        audiences: ['vault'],
        expirationSeconds: 3600,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: podName, uid },
      },
    }),
  };
}

describe('token manager against an API server', () => {
  test('fetches a bound token once and serves it from cache', async (t) => {
    const env = await setup(t);
    const first = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    assert.match(first.status?.token ?? '', /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(first.status?.expirationTimestamp instanceof Date);
    const again = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    assert.equal(again.status?.token, first.status?.token);
    assert.equal(env.api.hooks.issuedTokens.length, 1);
    const issued = at(env.api.hooks.issuedTokens, 0);
    assert.deepEqual(issued.audiences, ['vault']);
    assert.equal(issued.expirationSeconds, 3600);
    assert.deepEqual(issued.boundObjectRef, {
      apiVersion: 'v1',
      kind: 'Pod',
      name: 'job-1',
      uid: env.podUID,
    });
  });

  test('a different audience is a different token', async (t) => {
    const env = await setup(t);
    const a = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    const other = env.request();
    must(other.spec, 'spec').audiences = ['sts.amazonaws.com'];
    const b = await env.tm.getServiceAccountToken('ci', 'builder', other);
    assert.notEqual(a.status?.token, b.status?.token);
    assert.equal(env.api.hooks.issuedTokens.length, 2);
  });

  test('refreshes after 80 % of the lifetime, not before', async (t) => {
    const env = await setup(t);
    const first = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    env.advance(0.75 * HOUR);
    const still = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    assert.equal(still.status?.token, first.status?.token);
    env.advance(0.1 * HOUR);
    const fresh = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    assert.notEqual(fresh.status?.token, first.status?.token);
    assert.equal(env.api.hooks.issuedTokens.length, 2);
  });

  test('a refused first request reports "failed to fetch token" with the forbidden reason', async (t) => {
    const env = await setup(t);
    env.api.hooks.forbid({ resource: 'serviceaccounts', subresource: 'token' });
    await assert.rejects(env.tm.getServiceAccountToken('ci', 'builder', env.request()), (err: Error) => {
      assert.match(err.message, /^failed to fetch token: serviceaccounts "builder" is forbidden: User "/);
      assert.match(err.message, /cannot create resource "serviceaccounts\/token"/);
      assert.doesNotMatch(err.message, /Headers|HTTP-Code/);
      return true;
    });
  });

  test('when a refresh fails, a still-valid cached token is served and the failure logged without it', async (t) => {
    const env = await setup(t);
    const first = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    env.api.hooks.forbid({ resource: 'serviceaccounts', subresource: 'token' });
    env.advance(0.9 * HOUR);
    const served = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    assert.equal(served.status?.token, first.status?.token);
    const warning = env.logger.lines.find((l) => l.level === 'warn');
    assert.ok(warning, 'a warning is logged');
    assert.match(JSON.stringify(warning), /forbidden/);
    assert.ok(!JSON.stringify(env.logger.lines).includes(first.status?.token ?? '<none>'));
  });

  test('when a refresh fails after expiry, the error names the cache key and the cause', async (t) => {
    const env = await setup(t);
    await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    env.api.hooks.forbid({ resource: 'serviceaccounts', subresource: 'token' });
    env.advance(1.5 * HOUR);
    const key = tokenCacheKey('builder', 'ci', env.request());
    await assert.rejects(env.tm.getServiceAccountToken('ci', 'builder', env.request()), (err: Error) => {
      assert.ok(err.message.startsWith(`token ${key} expired and refresh failed: `), err.message);
      assert.match(err.message, /forbidden/);
      return true;
    });
  });

  test('a missing service account surfaces the API server message', async (t) => {
    const env = await setup(t);
    await assert.rejects(
      env.tm.getServiceAccountToken('ci', 'ghost', env.request()),
      /^ApiError: failed to fetch token: serviceaccounts "ghost" not found$/,
    );
    // Callers branch on the typed reason and code, not on the words.
    await assert.rejects(env.tm.getServiceAccountToken('ci', 'ghost', env.request()), {
      reason: 'NotFound',
      code: 404,
    });
  });

  test("deleting by pod UID drops only that pod's tokens", async (t) => {
    const env = await setup(t);
    const other = env.api.store.create('pods', {
      metadata: { name: 'job-2', namespace: 'ci' },
      spec: { serviceAccountName: 'builder', containers: [{ name: 'c', image: 'busybox' }] },
    });
    const otherReq = env.request('job-2', other.metadata.uid);
    const mine = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    const theirs = await env.tm.getServiceAccountToken('ci', 'builder', otherReq);
    env.tm.deleteServiceAccountToken(env.podUID);
    const mineAgain = await env.tm.getServiceAccountToken('ci', 'builder', env.request());
    const theirsAgain = await env.tm.getServiceAccountToken('ci', 'builder', otherReq);
    assert.notEqual(mineAgain.status?.token, mine.status?.token);
    assert.equal(theirsAgain.status?.token, theirs.status?.token);
    assert.equal(env.api.hooks.issuedTokens.length, 3);
  });

  test('concurrent requests for the same token share one TokenRequest', async (t) => {
    const env = await setup(t);
    const [a, b] = await Promise.all([
      env.tm.getServiceAccountToken('ci', 'builder', env.request()),
      env.tm.getServiceAccountToken('ci', 'builder', env.request()),
    ]);
    assert.equal(a.status?.token, b.status?.token);
    assert.equal(env.api.hooks.issuedTokens.length, 1);
  });
});

test('standalone mode fails with kubelet-compatible wording', async () => {
  const tm = createStandaloneTokenManager();
  await assert.rejects(tm.getServiceAccountToken('ns', 'sa', {}), {
    message: STANDALONE_TOKEN_MANAGER_ERROR,
  });
  assert.ok(STANDALONE_TOKEN_MANAGER_ERROR.startsWith('cannot use TokenManager when '));
});
