import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { V1ClusterRole, V1DaemonSet, V1PolicyRule } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { at, must } from '../helpers/must.ts';
import { manifestProblems } from './k8s-fields.ts';
import { build, deployDir } from './kustomize.ts';

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

function load(path: string): Manifest[] {
  const text = readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
  return parseAllDocuments(text).map((d) => {
    assert.deepEqual(d.errors, [], `${path} parses as YAML`);
    return d.toJS() as Manifest;
  });
}

const docs = load('deploy/daemonset.yaml');
const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
const ds = at(byKind('DaemonSet'), 0) as unknown as V1DaemonSet;
const dsSpec = must(ds.spec, 'DaemonSet spec');
const pod = must(dsSpec.template.spec, 'pod template spec');
const container = at(pod.containers, 0, 'container');
const args = must(container.args, 'container args');
const volumeMounts = must(container.volumeMounts, 'container volumeMounts');
const volumes = must(pod.volumes, 'pod volumes');

const grantsOf = (role: V1ClusterRole) =>
  (role.rules as V1PolicyRule[]).flatMap((r) =>
    must(r.apiGroups, 'rule apiGroups').flatMap((g) =>
      must(r.resources, 'rule resources').flatMap((res) => r.verbs.map((v) => `${g || 'core'}/${res}:${v}`)),
    ),
  );

describe('deploy/daemonset.yaml', () => {
  test('holds a Namespace, a ServiceAccount and the DaemonSet: no RBAC at all', () => {
    assert.deepEqual(
      docs.map((d) => d.kind),
      ['Namespace', 'ServiceAccount', 'DaemonSet'],
    );
  });

  test("least privilege: the node's own credentials, no service-account token", () => {
    const sa = at(byKind('ServiceAccount'), 0) as unknown as { automountServiceAccountToken?: boolean };
    assert.equal(sa.automountServiceAccountToken, false);
    assert.equal(pod.automountServiceAccountToken, false);
    assert.ok(args.includes('--kubeconfig=/etc/podvol/node/kubeconfig'));
    const mount = volumeMounts.find((m) => m.mountPath === '/etc/podvol/node');
    assert.equal(mount?.readOnly, true);
    const volume = volumes.find((v) => v.name === mount?.name);
    assert.deepEqual(volume?.hostPath, { path: '/etc/podvol/node', type: 'Directory' });
  });

  test('the `kubectl apply -k deploy/` build is exactly this file', () => {
    assert.deepEqual(build(deployDir), docs);
  });

  test('every field is a real field of its Kubernetes type', () => {
    for (const d of [
      ...docs,
      ...load('deploy/prometheus/servicemonitor.yaml').filter((x) => x.apiVersion === 'v1'),
    ]) {
      assert.deepEqual(manifestProblems(d), [], `${d.kind} ${d.metadata.name}`);
    }
  });

  test('listens on all addresses with authentication and authorization; probes use the anonymous endpoints', () => {
    assert.ok(args.includes('--authentication-token-webhook=true'));
    assert.ok(args.includes('--authorization-mode=Webhook'));
    for (const p of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      assert.equal(p?.httpGet?.scheme, 'HTTPS');
      assert.ok(['/healthz', '/readyz'].includes(p?.httpGet?.path ?? ''));
    }
  });
});

describe('deploy/cluster-wide (opt-in variant)', () => {
  const variant = build(join(deployDir, 'cluster-wide'));
  const kinds = (k: string) => variant.filter((d) => d.kind === k);
  const vds = at(kinds('DaemonSet'), 0) as unknown as V1DaemonSet;
  const vpod = must(must(vds.spec, 'DaemonSet spec').template.spec, 'pod template spec');

  test('the default manifests plus a ClusterRole and its binding', () => {
    assert.deepEqual(
      variant.map((d) => d.kind),
      ['Namespace', 'ServiceAccount', 'DaemonSet', 'ClusterRole', 'ClusterRoleBinding'],
    );
    for (const d of variant) assert.deepEqual(manifestProblems(d), [], `${d.kind} ${d.metadata.name}`);
  });

  test('runs on the ServiceAccount token instead of the node kubeconfig, otherwise unchanged', () => {
    assert.equal(vpod.automountServiceAccountToken, true);
    const c = at(vpod.containers, 0, 'container');
    assert.ok(!must(c.args, 'container args').some((a) => a.startsWith('--kubeconfig')));
    assert.ok(!must(vpod.volumes, 'pod volumes').some((v) => v.name === 'node-credentials'));
    assert.ok(!must(c.volumeMounts, 'container volumeMounts').some((m) => m.name === 'node-credentials'));
    // Everything else is the default DaemonSet's.
    const strip = (p: typeof pod) => ({
      ...p,
      automountServiceAccountToken: undefined,
      volumes: must(p.volumes, 'pod volumes').filter((v) => v.name !== 'node-credentials'),
      containers: p.containers.map((x) => ({
        ...x,
        args: must(x.args, 'container args').filter((a) => !a.startsWith('--kubeconfig')),
        volumeMounts: must(x.volumeMounts, 'container volumeMounts').filter(
          (m) => m.name !== 'node-credentials',
        ),
      })),
    });
    assert.deepEqual(strip(vpod), strip(pod));
  });

  test('binds exactly the permissions the features need, read-only except tokens, events, the node CSI state and reviews', () => {
    const role = at(kinds('ClusterRole'), 0) as unknown as V1ClusterRole;
    const grants = grantsOf(role);
    const read = (gr: string) => ['get', 'list', 'watch'].map((v) => `${gr}:${v}`);
    assert.deepEqual(
      grants.sort(),
      [
        ...read('core/pods'),
        ...read('core/nodes'),
        'core/nodes:patch',
        'core/nodes/status:patch',
        ...read('core/persistentvolumeclaims'),
        'core/persistentvolumeclaims/status:patch',
        ...read('core/persistentvolumes'),
        'storage.k8s.io/csinodes:get',
        'storage.k8s.io/csinodes:create',
        'storage.k8s.io/csinodes:update',
        'storage.k8s.io/volumeattachments:get',
        ...read('core/secrets'),
        ...read('core/configmaps'),
        'core/serviceaccounts/token:create',
        'core/events:create',
        'core/events:patch',
        ...read('storage.k8s.io/csidrivers'),
        ...read('certificates.k8s.io/clustertrustbundles'),
        'authentication.k8s.io/tokenreviews:create',
        'authorization.k8s.io/subjectaccessreviews:create',
      ].sort(),
    );
    for (const r of must(role.rules, 'ClusterRole rules'))
      assert.ok(!r.verbs.includes('*') && !r.resources?.includes('*'), 'no wildcards');
    const binding = at(kinds('ClusterRoleBinding'), 0) as unknown as {
      roleRef: { name: string };
      subjects: { kind: string; name: string; namespace: string }[];
    };
    assert.equal(binding.roleRef.name, must(role.metadata, 'ClusterRole metadata').name);
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: pod.serviceAccountName, namespace: 'podvol' },
    ]);
  });
});

describe('deploy/prometheus/rbac-prometheus.yaml', () => {
  test('grants get on nodes/metrics and nothing else', () => {
    const docs2 = load('deploy/prometheus/rbac-prometheus.yaml');
    const role = docs2.find((d) => d.kind === 'ClusterRole') as unknown as V1ClusterRole;
    assert.deepEqual(grantsOf(role), ['core/nodes/metrics:get']);
    for (const d of docs2) assert.deepEqual(manifestProblems(d), [], `${d.kind} ${d.metadata.name}`);
  });
});

describe('deploy/daemonset.yaml, the pod', () => {
  test('runs privileged with the root directory shared Bidirectionally at the same path', () => {
    assert.equal(container.securityContext?.privileged, true);
    const rootArg = must(
      args.find((a) => a.startsWith('--root-dir=')),
      '--root-dir',
    );
    const rootDir = rootArg.slice('--root-dir='.length);
    const mount = volumeMounts.find((m) => m.mountPath === rootDir);
    assert.ok(mount, `a volume is mounted at ${rootDir}`);
    assert.equal(mount.mountPropagation, 'Bidirectional');
    const volume = volumes.find((v) => v.name === mount.name);
    assert.equal(volume?.hostPath?.path, rootDir, 'the host path and the container path agree');
  });

  test("serves a node name derived from spec.nodeName, never the kubelet's own by default", () => {
    const env = must(container.env, 'container env').find((e) => e.name === 'NODE_NAME');
    assert.equal(env?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
    const suffix = must(container.env, 'container env').find((e) => e.name === 'PODVOL_NODE_SUFFIX');
    assert.ok(suffix?.value, 'a non-empty suffix by default');
    assert.ok(args.includes('--node-name=$(NODE_NAME)$(PODVOL_NODE_SUFFIX)'));
  });

  test("resolves hostPaths under the host's / and serves the runtime socket on the host", () => {
    assert.ok(args.includes('--host-root=/host'));
    const host = must(
      volumeMounts.find((m) => m.mountPath === '/host'),
      'a mount at /host',
    );
    assert.equal(volumes.find((v) => v.name === host.name)?.hostPath?.path, '/');
    const sock = must(
      args.find((a) => a.startsWith('--runtime-socket=')),
      '--runtime-socket',
    ).slice('--runtime-socket='.length);
    const dir = must(
      volumeMounts.find((m) => m.mountPath === '/run/podvol'),
      'a mount at /run/podvol',
    );
    assert.equal(sock, '/run/podvol/podvol.sock');
    assert.equal(volumes.find((v) => v.name === dir.name)?.hostPath?.path, '/run/podvol');
  });

  test('is node-critical, tolerates every taint and rolls one node at a time', () => {
    assert.equal(pod.priorityClassName, 'system-node-critical');
    assert.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
    assert.equal(dsSpec.updateStrategy?.type, 'RollingUpdate');
    assert.equal(dsSpec.updateStrategy?.rollingUpdate?.maxUnavailable, 1);
    assert.equal(dsSpec.updateStrategy?.rollingUpdate?.maxSurge ?? 0, 0, 'never two agents on one node');
  });

  test('listens on all addresses of the host network, where the probes and Prometheus reach it', () => {
    assert.equal(pod.hostNetwork, true);
    assert.ok(args.includes('--listen=0.0.0.0:10280'));
    const port = must(container.ports, 'container ports').find((p) => p.name === 'metrics');
    assert.equal(port?.containerPort, 10280);
    const probe = (p: typeof container.livenessProbe) => [p?.httpGet?.path, p?.httpGet?.port];
    assert.deepEqual(probe(container.livenessProbe), ['/healthz', 'metrics']);
    assert.deepEqual(probe(container.readinessProbe), ['/readyz', 'metrics']);
    assert.ok(container.startupProbe?.httpGet, 'a startup probe covers slow starts');
    const startupBudget =
      must(container.startupProbe.periodSeconds, 'startupProbe.periodSeconds') *
      must(container.startupProbe.failureThreshold, 'startupProbe.failureThreshold');
    assert.ok(startupBudget >= 120, `startup probe allows ${startupBudget}s`);
  });

  test('sets requests and limits, and a grace period for in-flight operations', () => {
    for (const k of ['cpu', 'memory']) {
      assert.ok(container.resources?.requests?.[k], `requests.${k}`);
      assert.ok(container.resources?.limits?.[k], `limits.${k}`);
    }
    assert.ok((pod.terminationGracePeriodSeconds ?? 30) >= 60);
    assert.equal(
      container.lifecycle?.preStop,
      undefined,
      'stopping must not run anything that could unmount',
    );
  });

  test('uses the image entrypoint rather than overriding it', () => {
    assert.equal(container.command, undefined);
  });
});
