// The token and trust-bundle managers of a run without an API server, as
// kubelet's standalone managers: every request fails with kubelet's wording.
// Kept apart from token-manager.ts and trust-bundles.ts so that standalone mode
// never loads @kubernetes/client-node (test/agent/standalone-imports.test.ts).
import { ApiError } from '../errors.ts';
import type { TokenManager } from './token-manager.ts';
import type { TrustBundleManager } from './trust-bundles.ts';

// kubelet says "when kubelet is in standalone mode"; we keep its prefix so log searches for
// "cannot use TokenManager when" find both, and name ourselves in the rest.
export const STANDALONE_TOKEN_MANAGER_ERROR = 'cannot use TokenManager when podvol is in standalone mode';

// kubelet: "... is not supported in static kubelet mode"; same prefix, our name.
export const STANDALONE_TRUST_BUNDLE_ERROR =
  'ClusterTrustBundle projection is not supported in static podvol mode';

export function createStandaloneTokenManager(): TokenManager {
  return {
    getServiceAccountToken: () =>
      Promise.reject(new ApiError('StandaloneMode', STANDALONE_TOKEN_MANAGER_ERROR)),
    deleteServiceAccountToken: () => {},
    stop: () => {},
  };
}

export function createStandaloneTrustBundleManager(): TrustBundleManager {
  const fail = (): Promise<string> =>
    Promise.reject(new ApiError('StandaloneMode', STANDALONE_TRUST_BUNDLE_ERROR));
  return { getTrustAnchorsByName: fail, getTrustAnchorsBySigner: fail };
}
