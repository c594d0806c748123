// The gate in front of every route of a non-loopback listener: authenticate,
// map the request to node attributes, authorize. /healthz and /readyz stay
// anonymous (they say only "ok" or why not ready). No or a bad credential is
// 401, a denial 403, and when the API server cannot answer 503: never open.
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../../logger.ts';
import { describeAttributes, requestAttributes, type UserInfo } from './attributes.ts';
import type { Authenticator } from './authenticate.ts';
import type { Authorizer } from './authorize.ts';
import { ReviewUnavailableError } from './review-errors.ts';

export const ANONYMOUS_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

export type GuardDecision =
  | { allowed: true; user?: UserInfo }
  | { allowed: false; status: 401 | 403 | 503; body: string; headers?: Record<string, string> };

export interface Guard {
  check(req: IncomingMessage, path: string): Promise<GuardDecision>;
}

export function createGuard(o: {
  nodeName: string;
  authenticator: Authenticator;
  authorizer: Authorizer;
  logger: Logger;
  /** Minimum interval between two warnings about an unanswered review. */
  warnEveryMs?: number;
}): Guard {
  const log = o.logger.child({ component: 'access' });
  const warnEveryMs = o.warnEveryMs ?? 10_000;
  let lastWarn = 0;
  const unavailable = (err: ReviewUnavailableError): GuardDecision => {
    if (Date.now() - lastWarn >= warnEveryMs) {
      lastWarn = Date.now();
      log.warn({ err: err.message }, 'cannot check a request with the API server; refusing it with 503');
    }
    return {
      allowed: false,
      status: 503,
      body: `Service Unavailable: cannot check credentials with the API server: ${err.message}\n`,
      headers: { 'retry-after': '5' },
    };
  };
  return {
    async check(req, path) {
      if (ANONYMOUS_PATHS.has(path)) return { allowed: true };
      try {
        const authn = await o.authenticator.authenticate(req);
        if (!authn.ok) {
          log.debug({ path, reason: authn.reason }, 'unauthorized request');
          return {
            allowed: false,
            status: 401,
            body: 'Unauthorized\n',
            headers: { 'www-authenticate': 'Bearer realm="podvol"' },
          };
        }
        const attrs = requestAttributes(authn.user, req.method ?? '', path, o.nodeName);
        const decision = await o.authorizer.authorize(attrs);
        if (!decision.allowed) {
          log.debug(
            { path, attributes: describeAttributes(attrs), reason: decision.reason },
            'forbidden request',
          );
          return { allowed: false, status: 403, body: `Forbidden (${describeAttributes(attrs)})\n` };
        }
        return { allowed: true, user: authn.user };
      } catch (err) {
        if (err instanceof ReviewUnavailableError) return unavailable(err);
        throw err;
      }
    },
  };
}
