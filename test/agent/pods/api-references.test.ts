// Which static pods the API server would refuse as mirror pods (NodeRestriction, ServiceAccount admission).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { staticPodAPIReference } from '../../../src/agent/pods/api-references.ts';

const pod = (spec: object): V1Pod => ({
  metadata: { name: 'p' },
  spec: { containers: [{ name: 'c' }], ...spec },
});
const why = (spec: object) => staticPodAPIReference(pod(spec), 'n1');

test('a pod that names no API object is fine', () => {
  assert.equal(
    why({
      volumes: [
        { name: 'a', emptyDir: {} },
        { name: 'h', hostPath: { path: '/x' } },
      ],
    }),
    undefined,
  );
  assert.equal(
    why({ volumes: [{ name: 'd', projected: { sources: [{ downwardAPI: { items: [] } }] } }] }),
    undefined,
    'downwardAPI needs no API object',
  );
});

test('secrets anywhere the API server looks: volumes, projected, CSI, env, envFrom, imagePullSecrets', () => {
  const secretRule = /^node "n1" can not create pods that reference secrets/;
  assert.match(why({ volumes: [{ name: 's', secret: { secretName: 'x' } }] }) ?? '', secretRule);
  assert.match(
    why({ volumes: [{ name: 's', projected: { sources: [{ secret: { name: 'x' } }] } }] }) ?? '',
    secretRule,
  );
  assert.match(
    why({ volumes: [{ name: 's', csi: { driver: 'd', nodePublishSecretRef: { name: 'x' } } }] }) ?? '',
    secretRule,
  );
  assert.match(why({ imagePullSecrets: [{ name: 'regcred' }] }) ?? '', secretRule);
  assert.match(
    why({
      initContainers: [
        { name: 'i', env: [{ name: 'E', valueFrom: { secretKeyRef: { name: 'x', key: 'k' } } }] },
      ],
    }) ?? '',
    /initContainers\["i"\]\.env\["E"\]: secret "x"/,
  );
  assert.match(
    why({ containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'x' } }] }] }) ?? '',
    secretRule,
  );
});

test('configMaps, cluster trust bundles, PVCs, token projections, ephemeral volumes, service accounts', () => {
  assert.match(
    why({ volumes: [{ name: 'c', configMap: { name: 'x' } }] }) ?? '',
    /can not create pods that reference configmaps \(volume "c": configMap "x"\)/,
  );
  assert.match(
    why({
      volumes: [{ name: 'b', projected: { sources: [{ clusterTrustBundle: { name: 'x', path: 'p' } }] } }],
    }) ?? '',
    /reference clustertrustbundles/,
  );
  assert.match(
    why({ volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'x' } }] }) ?? '',
    /reference persistentvolumeclaims \(volume "v"\)/,
  );
  assert.match(
    why({ volumes: [{ name: 't', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } }] }) ??
      '',
    /a mirror pod may not use ServiceAccountToken volume projections/,
  );
  assert.match(why({ volumes: [{ name: 'e', ephemeral: {} }] }) ?? '', /generic ephemeral volumes/);
  assert.match(why({ serviceAccountName: 'sa' }) ?? '', /reference a service account/);
});
