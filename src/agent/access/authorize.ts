// May this user do this: --authorization-mode AlwaysAllow (every authenticated
// caller) or Webhook (a SubjectAccessReview, cached like kubelet's webhook
// authorizer: allowed answers 5 minutes, denied 30 seconds by default).
import { describeAttributes, type RequestAttributes } from './attributes.ts';
import { createReviewCache } from './cache.ts';
import type { ReviewClient } from './reviews.ts';

export type AuthorizationMode = 'AlwaysAllow' | 'Webhook';

export interface Authorizer {
  /** Throws ReviewUnavailableError when the API server cannot say. */
  authorize(a: RequestAttributes): Promise<{ allowed: boolean; reason: string }>;
}

export const alwaysAllow: Authorizer = {
  authorize: async () => ({ allowed: true, reason: 'AlwaysAllow' }),
};

export function createWebhookAuthorizer(o: {
  reviews: ReviewClient;
  authorizedTtlMs: number;
  unauthorizedTtlMs: number;
  now?: () => number;
}): Authorizer {
  const cache = createReviewCache<{ allowed: boolean; reason: string }>({
    ttlMs: (d) => (d.allowed ? o.authorizedTtlMs : o.unauthorizedTtlMs),
    now: o.now,
  });
  return {
    authorize(a) {
      const { user } = a;
      const key = JSON.stringify([
        user.username,
        user.uid ?? '',
        [...user.groups].sort(),
        Object.entries(user.extra ?? {}).sort(),
        describeAttributes(a),
        a.name,
      ]);
      return cache.get(key, () => o.reviews.reviewAccess(a));
    },
  };
}
