import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { defaultPod } from '../../../src/agent/pods/defaults.ts';
import { at } from '../../helpers/must.ts';

function podWith(spec: Record<string, unknown>): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'c', image: 'busybox:1.36' }], ...spec },
  } as V1Pod;
}

describe('defaultPod', () => {
  test('does not modify its input', () => {
    const input = podWith({ volumes: [{ name: 's', secret: { secretName: 's' } }] });
    const before = structuredClone(input);
    const out = defaultPod(input);
    assert.deepEqual(input, before);
    assert.notEqual(out, input);
  });

  test('defaultMode 0644 on secret, configMap, downwardAPI and projected volumes; explicit modes kept', () => {
    const out = defaultPod(
      podWith({
        volumes: [
          { name: 's', secret: { secretName: 's' } },
          { name: 'c', configMap: { name: 'c' } },
          { name: 'd', downwardAPI: { items: [] } },
          { name: 'p', projected: { sources: [] } },
          { name: 'k', secret: { secretName: 'k', defaultMode: 0o400 } },
          { name: 'z', configMap: { name: 'z', defaultMode: 0 } },
        ],
      }),
    );
    const v = out.spec?.volumes ?? [];
    assert.equal(at(v, 0).secret?.defaultMode, 0o644);
    assert.equal(at(v, 1).configMap?.defaultMode, 0o644);
    assert.equal(at(v, 2).downwardAPI?.defaultMode, 0o644);
    assert.equal(at(v, 3).projected?.defaultMode, 0o644);
    assert.equal(at(v, 4).secret?.defaultMode, 0o400);
    assert.equal(at(v, 5).configMap?.defaultMode, 0);
  });

  test('expirationSeconds 3600 on serviceAccountToken projections; fieldRef apiVersion v1', () => {
    const out = defaultPod(
      podWith({
        volumes: [
          {
            name: 'token',
            projected: {
              sources: [
                { serviceAccountToken: { path: 'token' } },
                { serviceAccountToken: { path: 'other', expirationSeconds: 7200 } },
                { downwardAPI: { items: [{ path: 'ns', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
              ],
            },
          },
        ],
      }),
    );
    const sources = out.spec?.volumes?.[0]?.projected?.sources ?? [];
    assert.equal(at(sources, 0).serviceAccountToken?.expirationSeconds, 3600);
    assert.equal(at(sources, 1).serviceAccountToken?.expirationSeconds, 7200);
    assert.equal(at(sources, 2).downwardAPI?.items?.[0]?.fieldRef?.apiVersion, 'v1');
  });

  test('hostPath type defaults to "" and a volume without any source becomes an emptyDir', () => {
    const out = defaultPod(podWith({ volumes: [{ name: 'h', hostPath: { path: '/srv' } }, { name: 'e' }] }));
    assert.deepEqual(out.spec?.volumes, [
      { name: 'h', hostPath: { path: '/srv', type: '' } },
      { name: 'e', emptyDir: {} },
    ]);
  });

  test('a volume with an unrecognised source is not turned into an emptyDir', () => {
    const out = defaultPod(podWith({ volumes: [{ name: 'x', nfsTypo: { server: 's' } }] }));
    assert.deepEqual(out.spec?.volumes, [{ name: 'x', nfsTypo: { server: 's' } }]);
  });

  test('numeric quantities become strings, as the API server returns them', () => {
    const out = defaultPod(
      podWith({
        containers: [{ name: 'c', image: 'i', resources: { limits: { cpu: 1, memory: '64Mi' } } }],
        volumes: [{ name: 'm', emptyDir: { medium: 'Memory', sizeLimit: 1000000 } }],
      }),
    );
    assert.equal(out.spec?.volumes?.[0]?.emptyDir?.sizeLimit, '1000000');
    assert.equal(out.spec?.containers[0]?.resources?.limits?.cpu, '1');
  });

  test('requests default to limits per resource, explicit requests win', () => {
    const out = defaultPod(
      podWith({
        containers: [
          {
            name: 'a',
            image: 'i',
            resources: { limits: { cpu: '2', memory: '1Gi' }, requests: { cpu: '500m' } },
          },
          { name: 'b', image: 'i', resources: { limits: { memory: '64Mi' } } },
          { name: 'c', image: 'i' },
        ],
        initContainers: [{ name: 'i', image: 'i', resources: { limits: { cpu: '1' } } }],
      }),
    );
    const containers = out.spec?.containers ?? [];
    assert.deepEqual(at(containers, 0).resources?.requests, { cpu: '500m', memory: '1Gi' });
    assert.deepEqual(at(containers, 1).resources?.requests, { memory: '64Mi' });
    assert.equal(at(containers, 2).resources, undefined);
    assert.deepEqual(out.spec?.initContainers?.[0]?.resources?.requests, { cpu: '1' });
  });

  test('pod spec and container defaults; no service account (that is admission, not defaulting)', () => {
    const out = defaultPod(
      podWith({
        containers: [
          { name: 'a', image: 'busybox' },
          { name: 'b', image: 'registry:5000/busybox:1.36', ports: [{ containerPort: 80 }] },
        ],
      }),
    );
    const spec = out.spec;
    assert.equal(spec?.restartPolicy, 'Always');
    assert.equal(spec?.dnsPolicy, 'ClusterFirst');
    assert.equal(spec?.terminationGracePeriodSeconds, 30);
    assert.equal(spec?.schedulerName, 'default-scheduler');
    assert.equal(spec?.enableServiceLinks, true);
    assert.deepEqual(spec?.securityContext, {});
    assert.equal(spec?.serviceAccountName, undefined);
    assert.equal(spec?.containers[0]?.imagePullPolicy, 'Always');
    assert.equal(spec?.containers[1]?.imagePullPolicy, 'IfNotPresent');
    assert.equal(spec?.containers[0]?.terminationMessagePath, '/dev/termination-log');
    assert.equal(spec?.containers[0]?.terminationMessagePolicy, 'File');
    assert.equal(spec?.containers[1]?.ports?.[0]?.protocol, 'TCP');
  });

  test('tolerates malformed input instead of throwing', () => {
    const weird = {
      apiVersion: 'v1',
      kind: 'Pod',
      spec: { volumes: 'nope', containers: [null, 3] },
    } as unknown as V1Pod;
    assert.doesNotThrow(() => defaultPod(weird));
    assert.doesNotThrow(() => defaultPod({} as V1Pod));
  });
});
