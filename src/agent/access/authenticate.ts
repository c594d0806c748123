// Who is calling: a client certificate signed by --client-ca-file (user = CN,
// groups = O, as the API server's x509 authenticator), else a bearer token
// checked with a TokenReview and cached (--authentication-token-webhook).
// A bad certificate does not stop a good token, as in kubelet's union of
// authenticators.
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import type { UserInfo } from './attributes.ts';
import { createReviewCache } from './cache.ts';
import type { ReviewClient, TokenReviewResult } from './reviews.ts';

export type AuthnResult =
  | { ok: true; user: UserInfo; method: 'x509' | 'token' }
  | { ok: false; reason: string };

export interface Authenticator {
  /** Throws ReviewUnavailableError when the API server cannot say. */
  authenticate(req: IncomingMessage): Promise<AuthnResult>;
}

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';

/** The identity in a verified client certificate, or why there is none. */
export function certificateUser(socket: TLSSocket): AuthnResult | undefined {
  const peer = socket.getPeerCertificate?.();
  if (!peer || Object.keys(peer).length === 0) return undefined;
  if (!socket.authorized)
    return { ok: false, reason: `client certificate refused: ${String(socket.authorizationError)}` };
  // Go's x509 verification for client auth: an extended key usage list, if any, must allow it.
  const usages = socket.getPeerX509Certificate?.()?.keyUsage;
  if (usages && !usages.includes(CLIENT_AUTH) && !usages.includes(ANY_EXTENDED_KEY_USAGE))
    return { ok: false, reason: 'client certificate refused: not valid for client authentication' };
  const cn = peer.subject?.CN;
  const username = Array.isArray(cn) ? cn[0] : cn;
  if (!username) return { ok: false, reason: 'client certificate refused: no common name' };
  const o = peer.subject?.O;
  const groups = o === undefined ? [] : Array.isArray(o) ? o : [o];
  return { ok: true, user: { username, groups }, method: 'x509' };
}

/** The bearer token of a request (RFC 6750), or undefined. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const m = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

export function createAuthenticator(o: {
  /** Client certificates are looked at only when a client CA is configured. */
  clientCertificates: boolean;
  /** TokenReview client; undefined when --authentication-token-webhook is off. */
  reviews?: ReviewClient;
  /** kubelet's --authentication-token-webhook-cache-ttl, for answers both ways. */
  cacheTtlMs: number;
  now?: () => number;
}): Authenticator {
  // Cache keys are keyed hashes: the raw tokens never sit in memory as keys.
  const hashKey = randomBytes(32);
  const cache = createReviewCache<TokenReviewResult>({ ttlMs: () => o.cacheTtlMs, now: o.now });
  return {
    async authenticate(req) {
      let certFailure: string | undefined;
      if (o.clientCertificates && req.socket instanceof TLSSocket) {
        const r = certificateUser(req.socket);
        if (r?.ok) return r;
        certFailure = r?.reason;
      }
      const token = bearerToken(req);
      if (token !== undefined && o.reviews) {
        const reviews = o.reviews;
        const key = createHmac('sha256', hashKey).update(token).digest('base64');
        const r = await cache.get(key, () => reviews.reviewToken(token));
        if (r.authenticated) return { ok: true, user: r.user, method: 'token' };
        return { ok: false, reason: `invalid bearer token: ${r.error}` };
      }
      if (certFailure) return { ok: false, reason: certFailure };
      if (token !== undefined)
        return { ok: false, reason: 'bearer tokens are not accepted (token webhook off)' };
      return { ok: false, reason: 'no client certificate or bearer token' };
    },
  };
}
