// The resource table of the test API server: what it serves, under which group
// and versions, and which field selectors each kind accepts (the real server
// rejects any other field label with 400 BadRequest).

export interface ResourceDef {
  /** Store key: the plural, or `plural.group` for non-core groups. */
  readonly id: string;
  readonly group: string;
  readonly versions: readonly string[];
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly fieldLabels: readonly string[];
  readonly subresources: readonly string[];
  readonly shortNames?: readonly string[];
  /** Review APIs (TokenReview, SubjectAccessReview): only `create`, answered, never stored. */
  readonly createOnly?: boolean;
}

const metaFields = ['metadata.name', 'metadata.namespace'];

export interface ResourceOptions {
  /** certificates.k8s.io versions that serve clustertrustbundles (default ['v1beta1']). */
  clusterTrustBundleVersions?: readonly string[];
}

export function resourceTable(opts: ResourceOptions = {}): ResourceDef[] {
  const ctbVersions = opts.clusterTrustBundleVersions ?? ['v1beta1'];
  const core = (
    plural: string,
    singular: string,
    kind: string,
    namespaced: boolean,
    extra: string[] = [],
    subresources: string[] = [],
  ): ResourceDef => ({
    id: plural,
    group: '',
    versions: ['v1'],
    plural,
    singular,
    kind,
    namespaced,
    fieldLabels: [...metaFields, ...extra],
    subresources,
  });
  const defs: ResourceDef[] = [
    core(
      'pods',
      'pod',
      'Pod',
      true,
      [
        'spec.nodeName',
        'spec.restartPolicy',
        'spec.schedulerName',
        'spec.serviceAccountName',
        'spec.hostNetwork',
        'status.phase',
        'status.podIP',
        'status.nominatedNodeName',
      ],
      ['status'],
    ),
    core('nodes', 'node', 'Node', false, ['spec.unschedulable'], ['status']),
    core('secrets', 'secret', 'Secret', true, ['type']),
    core('configmaps', 'configmap', 'ConfigMap', true),
    core('persistentvolumeclaims', 'persistentvolumeclaim', 'PersistentVolumeClaim', true, [], ['status']),
    core('persistentvolumes', 'persistentvolume', 'PersistentVolume', false, [], ['status']),
    core('serviceaccounts', 'serviceaccount', 'ServiceAccount', true, [], ['token']),
    core('events', 'event', 'Event', true, [
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ]),
    {
      id: 'events.events.k8s.io',
      group: 'events.k8s.io',
      versions: ['v1'],
      plural: 'events',
      singular: 'event',
      kind: 'Event',
      namespaced: true,
      fieldLabels: [
        ...metaFields,
        'reason',
        'type',
        'regarding.kind',
        'regarding.name',
        'regarding.namespace',
      ],
      subresources: [],
    },
    {
      id: 'csidrivers.storage.k8s.io',
      group: 'storage.k8s.io',
      versions: ['v1'],
      plural: 'csidrivers',
      singular: 'csidriver',
      kind: 'CSIDriver',
      namespaced: false,
      fieldLabels: metaFields,
      subresources: [],
    },
    {
      id: 'csinodes.storage.k8s.io',
      group: 'storage.k8s.io',
      versions: ['v1'],
      plural: 'csinodes',
      singular: 'csinode',
      kind: 'CSINode',
      namespaced: false,
      fieldLabels: metaFields,
      subresources: [],
    },
    {
      id: 'volumeattachments.storage.k8s.io',
      group: 'storage.k8s.io',
      versions: ['v1'],
      plural: 'volumeattachments',
      singular: 'volumeattachment',
      kind: 'VolumeAttachment',
      namespaced: false,
      fieldLabels: metaFields,
      subresources: ['status'],
    },
  ];
  const rbac = (plural: string, singular: string, kind: string, namespaced: boolean): ResourceDef => ({
    id: `${plural}.rbac.authorization.k8s.io`,
    group: 'rbac.authorization.k8s.io',
    versions: ['v1'],
    plural,
    singular,
    kind,
    namespaced,
    fieldLabels: metaFields,
    subresources: [],
  });
  // Create-only review APIs: nothing is stored, the answer is computed (see reviews.ts).
  const review = (group: string, plural: string, singular: string, kind: string): ResourceDef => ({
    id: `${plural}.${group}`,
    group,
    versions: ['v1'],
    plural,
    singular,
    kind,
    namespaced: false,
    fieldLabels: metaFields,
    subresources: [],
    createOnly: true,
  });
  defs.push(
    rbac('clusterroles', 'clusterrole', 'ClusterRole', false),
    rbac('clusterrolebindings', 'clusterrolebinding', 'ClusterRoleBinding', false),
    rbac('roles', 'role', 'Role', true),
    rbac('rolebindings', 'rolebinding', 'RoleBinding', true),
    review('authentication.k8s.io', 'tokenreviews', 'tokenreview', 'TokenReview'),
    review('authorization.k8s.io', 'subjectaccessreviews', 'subjectaccessreview', 'SubjectAccessReview'),
  );
  if (ctbVersions.length > 0) {
    defs.push({
      id: 'clustertrustbundles.certificates.k8s.io',
      group: 'certificates.k8s.io',
      versions: ctbVersions,
      plural: 'clustertrustbundles',
      singular: 'clustertrustbundle',
      kind: 'ClusterTrustBundle',
      namespaced: false,
      fieldLabels: [...metaFields, 'spec.signerName'],
      subresources: [],
    });
  }
  return defs;
}

export function apiVersionOf(def: ResourceDef, version: string): string {
  return def.group === '' ? version : `${def.group}/${version}`;
}

const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

/** GET /api/v1 or /apis/<group>/<version>: an APIResourceList. */
export function resourceList(defs: readonly ResourceDef[], group: string, version: string): unknown {
  const resources: unknown[] = [];
  for (const d of defs) {
    if (d.group !== group || !d.versions.includes(version)) continue;
    resources.push({
      name: d.plural,
      singularName: d.singular,
      namespaced: d.namespaced,
      kind: d.kind,
      verbs: d.createOnly ? ['create'] : verbs,
    });
    for (const sub of d.subresources) {
      resources.push({
        name: `${d.plural}/${sub}`,
        singularName: '',
        namespaced: d.namespaced,
        kind: sub === 'token' ? 'TokenRequest' : d.kind,
        group: sub === 'token' ? 'authentication.k8s.io' : undefined,
        version: sub === 'token' ? 'v1' : undefined,
        verbs: sub === 'token' ? ['create'] : ['get', 'patch', 'update'],
      });
    }
  }
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources,
  };
}

function groupEntry(defs: readonly ResourceDef[], group: string): unknown {
  const versions = [...new Set(defs.filter((d) => d.group === group).flatMap((d) => d.versions))];
  const gv = versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
  return { name: group, versions: gv, preferredVersion: gv[0] };
}

/** GET /apis: an APIGroupList of every non-core group served. */
export function groupList(defs: readonly ResourceDef[]): unknown {
  const groups = [...new Set(defs.map((d) => d.group).filter((g) => g !== ''))];
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups.map((g) => groupEntry(defs, g)) };
}

/** GET /apis/<group>: an APIGroup, or undefined when the group is not served. */
export function apiGroup(defs: readonly ResourceDef[], group: string): unknown {
  if (!defs.some((d) => d.group === group)) return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...(groupEntry(defs, group) as object) };
}
