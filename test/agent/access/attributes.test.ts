// kubelet's mapping of a request on its port to node attributes (pkg/kubelet/server/auth.go).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestAttributes } from '../../../src/agent/access/attributes.ts';

const user = { username: 'alice', groups: ['system:authenticated'] };
const attrs = (method: string, path: string) => {
  const a = requestAttributes(user, method, path, 'node-1');
  return `${a.verb} ${a.resource}/${a.subresource} ${a.name} ns="${a.namespace}" group="${a.group}" ${a.version}`;
};

test('verbs come from the HTTP method as in kubelet; others map to an empty verb', () => {
  assert.equal(attrs('GET', '/status'), 'get nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('HEAD', '/status'), 'get nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('POST', '/status'), 'create nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('PUT', '/x'), 'update nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('PATCH', '/x'), 'patch nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('DELETE', '/x'), 'delete nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('OPTIONS', '/x'), ' nodes/proxy node-1 ns="" group="" v1');
});

test('/metrics and below is the metrics subresource; everything else proxy', () => {
  assert.equal(attrs('GET', '/metrics'), 'get nodes/metrics node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/metrics/cadvisor'), 'get nodes/metrics node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/metricsx'), 'get nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/stats/summary'), 'get nodes/stats node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/logs/syslog'), 'get nodes/log node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/spec/'), 'get nodes/spec node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/checkpoint/a/b/c'), 'get nodes/checkpoint node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/'), 'get nodes/proxy node-1 ns="" group="" v1');
  assert.equal(attrs('GET', '/healthz'), 'get nodes/proxy node-1 ns="" group="" v1');
});
