// Service-account token manager, modelled on kubelet's pkg/kubelet/token/token_manager.go:
// tokens requested through the TokenRequest API are cached per (sa, namespace, audiences,
// expirationSeconds, boundObjectRef) and refreshed at ~80 % of their lifetime or after 24 h,
// so every remount of a projected volume does not cost an API call.

import { type AuthenticationV1TokenRequest, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { type Clock, systemClock } from '../../clock.ts';
import { errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { ApiError } from '../errors.ts';
import { kubeErrorCode, toApiError } from './api-errors.ts';

export interface TokenManager {
  getServiceAccountToken(
    namespace: string,
    serviceAccountName: string,
    tr: AuthenticationV1TokenRequest,
  ): Promise<AuthenticationV1TokenRequest>;
  /** Forget every token bound to this pod (called when its projected volumes are torn down). */
  deleteServiceAccountToken(podUID: string): void;
  stop(): void;
}

export interface TokenManagerOptions {
  kubeConfig: KubeConfig;
  /** Time, the refresh jitter and the cache's clean-up timer (default the system's). */
  clock?: Clock;
  logger?: Logger;
}

const MAX_TTL_MS = 24 * 60 * 60 * 1000;
const GC_PERIOD_MS = 60 * 1000;
const MAX_JITTER_SECONDS = 10;

export const TOKEN_REQUEST_NOT_ENABLED_ERROR = 'the API server does not have TokenRequest endpoints enabled';

// The standalone managers live in standalone.ts: standalone mode must not load the Kubernetes client.
export { createStandaloneTokenManager, STANDALONE_TOKEN_MANAGER_ERROR } from './standalone.ts';

function toMs(t: Date | string | undefined): number | undefined {
  if (t === undefined) return undefined;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * Whether a cached token must be replaced (kubelet's requiresRefresh): older than 24 h minus
 * jitter, within 20 % of its TTL (plus jitter) of expiry, or issued "in the future" because
 * the clock went backwards. A token without expirationSeconds is never refreshed.
 */
export function requiresRefresh(tr: AuthenticationV1TokenRequest, nowMs: number, jitterMs: number): boolean {
  const expSeconds = tr.spec?.expirationSeconds;
  const exp = toMs(tr.status?.expirationTimestamp);
  if (expSeconds === undefined || expSeconds === null) return false;
  // No expiry on a cached token cannot be trusted: fetch a proper one.
  if (exp === undefined) return true;
  const iat = exp - expSeconds * 1000;
  if (nowMs > iat + MAX_TTL_MS - jitterMs) return true;
  // Go: (expirationSeconds*20)/100 in integer seconds.
  if (nowMs > exp - Math.trunc((expSeconds * 20) / 100) * 1000 - jitterMs) return true;
  if (nowMs < iat) return true;
  return false;
}

/** Go's %q for a string, close enough for a log-safe key (JSON escaping matches for printable text). */
function quote(s: string | undefined): string {
  return JSON.stringify(s ?? '');
}

/**
 * kubelet's cache key: fmt.Sprintf("%q/%q/%#v/%#v/%#v", name, namespace, audiences, exp, ref).
 * It never contains the token, so it is safe to log.
 */
export function tokenCacheKey(name: string, namespace: string, tr: AuthenticationV1TokenRequest): string {
  const aud = tr.spec?.audiences;
  const audiences = aud ? `[]string{${aud.map(quote).join(', ')}}` : '[]string(nil)';
  const exp = tr.spec?.expirationSeconds ?? 0;
  const r = tr.spec?.boundObjectRef ?? {};
  const ref =
    `v1.BoundObjectReference{Kind:${quote(r.kind)}, APIVersion:${quote(r.apiVersion)}, ` +
    `Name:${quote(r.name)}, UID:${quote(r.uid)}}`;
  return `${quote(name)}/${quote(namespace)}/${audiences}/${exp}/${ref}`;
}

interface CacheEntry {
  tr: AuthenticationV1TokenRequest;
  // The pod the token is bound to, from the response or, failing that, our request.
  podUID: string | undefined;
}

export function createTokenManager(opts: TokenManagerOptions): TokenManager {
  const clock = opts.clock ?? systemClock();
  const now = () => clock.now();
  const logger = opts.logger;
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const cache = new Map<string, CacheEntry>();
  // Concurrent SetUps of the same volume share one TokenRequest instead of racing.
  const inflight = new Map<string, Promise<AuthenticationV1TokenRequest>>();
  let tokenRequestSupported: Promise<boolean> | undefined;

  const expired = (tr: AuthenticationV1TokenRequest): boolean => {
    const exp = toMs(tr.status?.expirationTimestamp);
    return exp === undefined || now() > exp;
  };

  const jitterMs = (): number => Math.trunc(clock.random() * MAX_JITTER_SECONDS) * 1000;

  // Asked once, only to turn a 404 into a clearer error (kubelet does the same).
  const supportsTokenRequest = (): Promise<boolean> => {
    tokenRequestSupported ??= core.getAPIResources().then(
      (list) => list.resources.some((r) => r.name === 'serviceaccounts/token'),
      () => {
        tokenRequestSupported = undefined;
        return true;
      },
    );
    return tokenRequestSupported;
  };

  const fetchToken = async (
    name: string,
    namespace: string,
    tr: AuthenticationV1TokenRequest,
  ): Promise<AuthenticationV1TokenRequest> => {
    try {
      return await core.createNamespacedServiceAccountToken({ name, namespace, body: tr });
    } catch (err) {
      if (kubeErrorCode(err) === 404 && !(await supportsTokenRequest())) {
        throw new ApiError('NotFound', TOKEN_REQUEST_NOT_ENABLED_ERROR, { code: 404, cause: err });
      }
      throw toApiError(err);
    }
  };

  const refresh = async (
    key: string,
    name: string,
    namespace: string,
    tr: AuthenticationV1TokenRequest,
  ): Promise<AuthenticationV1TokenRequest> => {
    const cached = cache.get(key);
    let fresh: AuthenticationV1TokenRequest;
    try {
      fresh = await fetchToken(name, namespace, tr);
    } catch (err) {
      if (!cached) throw toApiError(err, 'failed to fetch token: ');
      if (expired(cached.tr)) throw toApiError(err, `token ${key} expired and refresh failed: `);
      logger?.warn({ cacheKey: key, err: errorMessage(err) }, "Couldn't update token");
      return cached.tr;
    }
    if (!fresh.status?.token) {
      if (!cached || expired(cached.tr))
        throw new ApiError('ServerError', 'failed to fetch token: the API server returned no token');
      return cached.tr;
    }
    // Older or partial servers may not echo the spec; refresh arithmetic needs it.
    fresh.spec ??= { ...tr.spec };
    fresh.spec.expirationSeconds ??= tr.spec?.expirationSeconds;
    cache.set(key, {
      tr: fresh,
      podUID: fresh.spec.boundObjectRef?.uid ?? tr.spec?.boundObjectRef?.uid,
    });
    return fresh;
  };

  const cleanup = (): void => {
    for (const [key, entry] of cache) {
      if (expired(entry.tr)) cache.delete(key);
    }
  };
  const gcTimer = clock.every(GC_PERIOD_MS, cleanup, { unref: true });

  return {
    async getServiceAccountToken(namespace, serviceAccountName, tr) {
      const key = tokenCacheKey(serviceAccountName, namespace, tr);
      const cached = cache.get(key);
      if (cached) {
        if (cached.tr.spec?.expirationSeconds === undefined) {
          logger?.error({ cacheKey: key }, 'Expiration seconds was nil for token request');
        }
        if (!requiresRefresh(cached.tr, now(), jitterMs())) return cached.tr;
      }
      const pending = inflight.get(key);
      if (pending) return pending;
      const p = refresh(key, serviceAccountName, namespace, tr).finally(() => inflight.delete(key));
      inflight.set(key, p);
      return p;
    },

    deleteServiceAccountToken(podUID) {
      for (const [key, entry] of cache) {
        if (entry.podUID === podUID) cache.delete(key);
      }
    },

    stop() {
      gcTimer.cancel();
    },
  };
}
