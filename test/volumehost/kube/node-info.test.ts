import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { attachedVolumes, NodeInfo, nodeHostIPs } from '../../../src/volumehost/kube/node-info.ts';
import { must } from '../../helpers/must.ts';
import { kubeEnv, waitFor } from './env.ts';

const withAddresses = (addresses: { type: string; address: string }[]): V1Node => ({
  metadata: { name: 'n' },
  status: { addresses },
});

describe('node info', () => {
  test('host IPs follow kubelet: InternalIP before ExternalIP, plus the first of the other family', () => {
    assert.deepEqual(
      nodeHostIPs(
        withAddresses([
          { type: 'Hostname', address: 'n1' },
          { type: 'ExternalIP', address: '203.0.113.5' },
          { type: 'InternalIP', address: '10.0.0.7' },
          { type: 'InternalIP', address: '10.0.0.8' },
          { type: 'ExternalIP', address: '2001:db8::5' },
        ]),
      ),
      ['10.0.0.7', '2001:db8::5'],
    );
    assert.deepEqual(nodeHostIPs(withAddresses([{ type: 'ExternalIP', address: '203.0.113.5' }])), [
      '203.0.113.5',
    ]);
    assert.throws(() => nodeHostIPs(withAddresses([{ type: 'Hostname', address: 'n1' }])), {
      message: 'host IP unknown; known addresses: [{Hostname n1}]',
    });
  });

  test('attached volumes come from status.volumesAttached', () => {
    const node: V1Node = {
      status: { volumesAttached: [{ name: 'kubernetes.io/csi/ebs^vol-1', devicePath: '/dev/xvdba' }] },
    };
    assert.deepEqual([...attachedVolumes(node)], [['kubernetes.io/csi/ebs^vol-1', '/dev/xvdba']]);
  });

  test('watches this node only: labels, allocatable, host IP, and later changes', async (t) => {
    const { api, kc } = await kubeEnv(t);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNode({ body: { metadata: { name: 'other' } } });
    await core.createNode({ body: { metadata: { name: 'node1', labels: { zone: 'a' } } } });
    const n = await core.readNode({ name: 'node1' });
    n.status = {
      addresses: [{ type: 'InternalIP', address: '10.1.2.3' }],
      allocatable: { cpu: '4', memory: '8Gi' },
    };
    await core.replaceNodeStatus({ name: 'node1', body: n });

    const info = new NodeInfo({ kubeConfig: kc, nodeName: 'node1' });
    t.after(() => info.stop());
    await info.start();
    assert.deepEqual(info.snapshot(), {
      labels: { zone: 'a' },
      allocatable: { cpu: '4', memory: '8Gi' },
      hostIP: '10.1.2.3',
      hostIPs: ['10.1.2.3'],
    });
    assert.ok(
      api.hooks.requests
        .filter((r) => r.resource === 'nodes' && r.verb === 'list')
        .every((r) => r.query.fieldSelector === 'metadata.name=node1'),
    );

    const cur = await core.readNode({ name: 'node1' });
    must(cur.metadata, 'metadata').labels = { zone: 'b' };
    await core.replaceNode({ name: 'node1', body: cur });
    await waitFor('the label change', () => info.snapshot()?.labels.zone === 'b');
  });

  test('a node that does not exist is a clear error', async (t) => {
    const { kc } = await kubeEnv(t);
    const info = new NodeInfo({ kubeConfig: kc, nodeName: 'ghost' });
    t.after(() => info.stop());
    assert.throws(() => info.getNode(), { message: 'node "ghost" not synced yet' });
    await info.start();
    assert.equal(info.snapshot(), undefined);
    assert.throws(() => info.hostIPs(), { message: 'node "ghost" not found' });
  });
});
