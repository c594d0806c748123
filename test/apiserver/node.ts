// The objects a node agent finds on a fresh cluster: its Node (InternalIP
// 10.0.0.7, the given allocatable) and the default ServiceAccount, which
// pods name when they say nothing.
import type { TestStore } from './store.ts';

export function addNode(
  store: TestStore,
  name: string,
  allocatable: Record<string, string> = { cpu: '2', memory: '4Gi' },
): void {
  store.create('nodes', {
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    status: { allocatable, addresses: [{ type: 'InternalIP', address: '10.0.0.7' }] },
  });
  store.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
}
