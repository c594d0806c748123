// The two questions podvol asks the API server about a caller, as kubelet's
// webhook authenticator and authorizer do: who holds this bearer token
// (TokenReview), and may this user do this to this node (SubjectAccessReview).
// Anything short of an answer (unreachable, timeout, 5xx, podvol itself
// forbidden to ask) is a ReviewUnavailableError: the caller must then refuse
// with 503, never let the request through.
import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  type ConfigurationOptions,
  type KubeConfig,
  Observable,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { describeKubeError } from '../../volumehost/kube/api-errors.ts';
import type { RequestAttributes, UserInfo } from './attributes.ts';

/** kubelet's TokenAccessReviewTimeout and the webhook authorizer's timeout. */
import { ReviewUnavailableError } from './review-errors.ts';

export const REVIEW_TIMEOUT_MS = 10_000;

export { ReviewUnavailableError } from './review-errors.ts';

export type TokenReviewResult =
  | { authenticated: true; user: UserInfo }
  | { authenticated: false; error: string };

export interface ReviewClient {
  reviewToken(token: string): Promise<TokenReviewResult>;
  /** true: allowed; false: denied or no opinion (nothing else decides after it). */
  reviewAccess(a: RequestAttributes): Promise<{ allowed: boolean; reason: string }>;
}

/** Request options that abort the call after `ms` (client-node has no timeout of its own). */
function withTimeout(ms: number): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (ctx: RequestContext) => {
          ctx.setSignal(AbortSignal.timeout(ms));
          return new Observable(Promise.resolve(ctx));
        },
        post: (ctx: ResponseContext) => new Observable(Promise.resolve(ctx)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

async function ask<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new ReviewUnavailableError(`${what}: ${describeKubeError(err)}`);
  }
}

export function createReviewClient(kubeConfig: KubeConfig, timeoutMs = REVIEW_TIMEOUT_MS): ReviewClient {
  const authn = kubeConfig.makeApiClient(AuthenticationV1Api);
  const authz = kubeConfig.makeApiClient(AuthorizationV1Api);
  return {
    async reviewToken(token) {
      // No audiences: the API server checks the token against its own, as for kubelet.
      const tr = await ask('TokenReview', () =>
        authn.createTokenReview(
          { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } } },
          withTimeout(timeoutMs),
        ),
      );
      const s = tr.status;
      if (!s?.authenticated || !s.user?.username)
        return { authenticated: false, error: s?.error || 'token not authenticated' };
      return {
        authenticated: true,
        user: {
          username: s.user.username,
          uid: s.user.uid,
          groups: s.user.groups ?? [],
          extra: s.user.extra,
        },
      };
    },
    async reviewAccess(a) {
      const sar = await ask('SubjectAccessReview', () =>
        authz.createSubjectAccessReview(
          {
            body: {
              apiVersion: 'authorization.k8s.io/v1',
              kind: 'SubjectAccessReview',
              spec: {
                user: a.user.username,
                uid: a.user.uid,
                groups: a.user.groups,
                extra: a.user.extra,
                resourceAttributes: {
                  namespace: a.namespace,
                  verb: a.verb,
                  group: a.group,
                  version: a.version,
                  resource: a.resource,
                  subresource: a.subresource,
                  name: a.name,
                },
              },
            },
          },
          withTimeout(timeoutMs),
        ),
      );
      const s = sar.status;
      if (s?.evaluationError && !s.allowed && !s.denied) {
        // The webhook authorizer treats an evaluation error without a decision as no opinion.
        return { allowed: false, reason: s.evaluationError };
      }
      return { allowed: s?.allowed === true && s.denied !== true, reason: s?.reason ?? '' };
    },
  };
}
