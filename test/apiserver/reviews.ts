// TokenReview and SubjectAccessReview for the test API server, answered the
// way kube-apiserver answers them: a token is looked up among the static
// tokens the test registered and the service-account tokens this server
// issued; an access review is decided by RBAC over the ClusterRoles, Roles and
// their bindings in the store (no other authorizer, so "no rule" is a deny).
import type { KubeObj } from './selectors.ts';
import { StatusError } from './status.ts';
import type { TestStore } from './store.ts';

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** A service-account token this server issued (what TokenReview needs of it). */
export interface IssuedIdentity {
  token: string;
  namespace: string;
  serviceAccount: string;
  serviceAccountUID?: string;
  audiences: string[];
  /** Seconds since the epoch. */
  exp: number;
  pod?: { name: string; uid: string };
}

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}

interface ResourceAttributes {
  namespace?: string;
  verb?: string;
  group?: string;
  resource?: string;
  subresource?: string;
  name?: string;
}

const AUTHENTICATED = 'system:authenticated';

function body(input: unknown, kind: string): KubeObj & { spec?: Record<string, unknown> } {
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    throw new StatusError(400, `the body of the request must be a ${kind} object`);
  return input as KubeObj & { spec?: Record<string, unknown> };
}

/** The user behind a bearer token, or undefined when the server does not know it. */
export function authenticateToken(
  token: string,
  statics: ReadonlyMap<string, UserInfo>,
  issued: readonly IssuedIdentity[],
  nowSeconds: number,
): UserInfo | undefined {
  const known = statics.get(token);
  if (known) {
    const groups = [...(known.groups ?? [])];
    if (!groups.includes(AUTHENTICATED)) groups.push(AUTHENTICATED);
    return { ...known, groups };
  }
  const sa = issued.find((i) => i.token === token);
  if (!sa || sa.exp <= nowSeconds) return undefined;
  return {
    username: `system:serviceaccount:${sa.namespace}:${sa.serviceAccount}`,
    uid: sa.serviceAccountUID,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`, AUTHENTICATED],
    extra: sa.pod
      ? {
          'authentication.kubernetes.io/pod-name': [sa.pod.name],
          'authentication.kubernetes.io/pod-uid': [sa.pod.uid],
        }
      : undefined,
  };
}

/** POST /apis/authentication.k8s.io/v1/tokenreviews */
export function tokenReview(
  input: unknown,
  statics: ReadonlyMap<string, UserInfo>,
  issued: readonly IssuedIdentity[],
): Record<string, unknown> {
  const tr = body(input, 'TokenReview');
  const token = tr.spec?.token;
  if (typeof token !== 'string' || token === '')
    throw new StatusError(422, 'TokenReview.authentication.k8s.io "" is invalid: spec.token: Required value');
  const user = authenticateToken(token, statics, issued, Math.floor(Date.now() / 1000));
  const requested = (tr.spec?.audiences as string[] | undefined) ?? [];
  const sa = issued.find((i) => i.token === token);
  // A token is good for the audiences asked for only if it carries one of them (static tokens: any).
  const audiences = requested.length === 0 ? ['https://kubernetes.default.svc.cluster.local'] : requested;
  const audienceOk = !sa || sa.audiences.some((a) => audiences.includes(a));
  const status =
    user && audienceOk
      ? {
          authenticated: true,
          user,
          audiences: sa ? sa.audiences.filter((a) => audiences.includes(a)) : audiences,
        }
      : {
          authenticated: false,
          user: {},
          error: user ? 'token audiences is invalid for the target audiences' : 'invalid bearer token',
        };
  return {
    kind: 'TokenReview',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { creationTimestamp: null },
    spec: tr.spec,
    status,
  };
}

function includes(list: string[] | undefined, value: string): boolean {
  return (list ?? []).some((v) => v === '*' || v === value);
}

function resourceMatches(rule: PolicyRule, resource: string, subresource: string): boolean {
  const combined = subresource ? `${resource}/${subresource}` : resource;
  for (const r of rule.resources ?? []) {
    if (r === '*' || r === combined) return true;
    if (subresource && r === `${resource}/*`) return true;
    if (subresource && r === `*/${subresource}`) return true;
  }
  return false;
}

function ruleAllows(
  rule: PolicyRule,
  a: ResourceAttributes | undefined,
  path: string | undefined,
  verb: string,
): boolean {
  if (!includes(rule.verbs, verb)) return false;
  if (a) {
    if (!includes(rule.apiGroups, a.group ?? '')) return false;
    if (!resourceMatches(rule, a.resource ?? '', a.subresource ?? '')) return false;
    const names = rule.resourceNames ?? [];
    return names.length === 0 || (a.name !== undefined && names.includes(a.name));
  }
  return (rule.nonResourceURLs ?? []).some(
    (u) => u === '*' || u === path || (u.endsWith('*') && path?.startsWith(u.slice(0, -1))),
  );
}

function subjectMatches(s: Subject, user: string, groups: string[], bindingNamespace?: string): boolean {
  switch (s.kind) {
    case 'User':
      return s.name === user;
    case 'Group':
      return s.name !== undefined && groups.includes(s.name);
    case 'ServiceAccount':
      return user === `system:serviceaccount:${s.namespace ?? bindingNamespace}:${s.name}`;
    default:
      return false;
  }
}

/** POST /apis/authorization.k8s.io/v1/subjectaccessreviews, decided by RBAC over the store. */
export function subjectAccessReview(input: unknown, store: TestStore): Record<string, unknown> {
  const sar = body(input, 'SubjectAccessReview');
  const spec = (sar.spec ?? {}) as {
    user?: string;
    groups?: string[];
    resourceAttributes?: ResourceAttributes;
    nonResourceAttributes?: { path?: string; verb?: string };
  };
  const ra = spec.resourceAttributes;
  const nra = spec.nonResourceAttributes;
  if ((!ra && !nra) || (ra && nra))
    throw new StatusError(
      422,
      'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified',
    );
  if (!spec.user && !spec.groups?.length)
    throw new StatusError(
      422,
      'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified',
    );
  const user = spec.user ?? '';
  const groups = spec.groups ?? [];
  const verb = (ra ? ra.verb : nra?.verb) ?? '';
  const namespace = ra?.namespace ?? '';

  let reason = '';
  const roleRules = (ref: { kind?: string; name?: string }, ns: string | undefined): PolicyRule[] => {
    const role =
      ref.kind === 'ClusterRole'
        ? store.get('clusterroles.rbac.authorization.k8s.io', undefined, ref.name ?? '')
        : store.get('roles.rbac.authorization.k8s.io', ns, ref.name ?? '');
    return ((role as { rules?: PolicyRule[] } | undefined)?.rules ?? []) as PolicyRule[];
  };
  const bindings: { kind: string; obj: KubeObj; ns?: string }[] = [
    ...store
      .list('clusterrolebindings.rbac.authorization.k8s.io')
      .map((obj) => ({ kind: 'ClusterRoleBinding', obj })),
    ...(namespace && ra
      ? store
          .list('rolebindings.rbac.authorization.k8s.io', namespace)
          .map((obj) => ({ kind: 'RoleBinding', obj, ns: namespace }))
      : []),
  ];
  let allowed = false;
  for (const b of bindings) {
    const o = b.obj as KubeObj & { subjects?: Subject[]; roleRef?: { kind?: string; name?: string } };
    const subject = (o.subjects ?? []).find((s) => subjectMatches(s, user, groups, b.ns));
    if (!subject || !o.roleRef) continue;
    if (roleRules(o.roleRef, b.ns).some((r) => ruleAllows(r, ra, nra?.path, verb))) {
      allowed = true;
      reason = `RBAC: allowed by ${b.kind} "${o.metadata.name}${b.ns ? `/${b.ns}` : ''}" of ${o.roleRef.kind} "${o.roleRef.name}" to ${subject.kind} "${subject.name}"`;
      break;
    }
  }
  return {
    kind: 'SubjectAccessReview',
    apiVersion: 'authorization.k8s.io/v1',
    metadata: { creationTimestamp: null },
    spec: sar.spec,
    status: allowed ? { allowed: true, reason } : { allowed: false },
  };
}
