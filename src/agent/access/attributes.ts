// What a request to podvol's HTTP port asks for, in the API server's terms,
// exactly as kubelet maps requests to its own port (pkg/kubelet/server/auth.go):
// the node object's proxy subresource by default, more specific subresources
// for the paths kubelet singles out. An operator's RBAC for kubelet's port
// (nodes/metrics for Prometheus, nodes/proxy for the rest) therefore applies
// to podvol unchanged.

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export interface RequestAttributes {
  user: UserInfo;
  verb: string;
  namespace: '';
  group: '';
  version: 'v1';
  resource: 'nodes';
  subresource: string;
  name: string;
  path: string;
}

// kubelet maps these HTTP methods and leaves every other one with an empty verb.
const VERBS: Record<string, string> = {
  POST: 'create',
  GET: 'get',
  HEAD: 'get',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

// Path prefixes kubelet gives their own subresource; everything else is "proxy".
const SUBRESOURCES: [prefix: string, subresource: string][] = [
  ['/stats', 'stats'],
  ['/metrics', 'metrics'],
  ['/logs', 'log'],
  ['/spec', 'spec'],
  ['/checkpoint', 'checkpoint'],
];

/** kubelet's isSubpath: `path` is `prefix` or below it. */
function isSubpath(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}

export function requestAttributes(
  user: UserInfo,
  method: string,
  path: string,
  nodeName: string,
): RequestAttributes {
  const sub = SUBRESOURCES.find(([prefix]) => isSubpath(path, prefix));
  return {
    user,
    verb: VERBS[method] ?? '',
    namespace: '',
    group: '',
    version: 'v1',
    resource: 'nodes',
    subresource: sub ? sub[1] : 'proxy',
    name: nodeName,
    path,
  };
}

/** The one-line description kubelet puts in its 403 body and logs. */
export function describeAttributes(a: RequestAttributes): string {
  return `user=${a.user.username}, verb=${a.verb}, resource=${a.resource}, subresource=${a.subresource}`;
}
