// This node's object, watched (list+watch with fieldSelector metadata.name=<node>,
// the only node query a node identity may make): labels, allocatable, host IPs
// and the volumes the attach/detach controller reports as attached.

import { isIP, isIPv6 } from 'node:net';
import { CoreV1Api, type V1Node, type V1NodeAddress } from '@kubernetes/client-node';
import { type InformerOptions, informerTuning, Reflector, ReflectorInformer } from './reflector.ts';

export interface NodeInfoOptions extends InformerOptions {
  nodeName: string;
}

/** What the volume host needs from the node. */
export interface NodeSnapshot {
  labels: Record<string, string>;
  allocatable: Record<string, string>;
  hostIP?: string;
  hostIPs: string[];
}

function formatAddresses(addrs: V1NodeAddress[]): string {
  return `[${addrs.map((a) => `{${a.type} ${a.address}}`).join(' ')}]`;
}

/**
 * kubelet's GetNodeHostIPs (pkg/util/node): InternalIPs first, then
 * ExternalIPs; the first is the host IP, plus the first one of the other IP
 * family on a dual-stack node.
 */
export function nodeHostIPs(node: V1Node): string[] {
  const addrs = node.status?.addresses ?? [];
  const valid = (a: V1NodeAddress) => isIP(a.address) !== 0;
  const all = [
    ...addrs.filter((a) => a.type === 'InternalIP' && valid(a)),
    ...addrs.filter((a) => a.type === 'ExternalIP' && valid(a)),
  ].map((a) => a.address);
  const [first] = all;
  if (first === undefined) throw new Error(`host IP unknown; known addresses: ${formatAddresses(addrs)}`);
  const ips = [first];
  const other = all.find((ip) => isIPv6(ip) !== isIPv6(first));
  if (other) ips.push(other);
  return ips;
}

/** kubelet's GetAttachedVolumesFromNodeStatus: unique volume name → device path. */
export function attachedVolumes(node: V1Node): Map<string, string> {
  return new Map((node.status?.volumesAttached ?? []).map((v) => [v.name, v.devicePath]));
}

export class NodeInfo extends ReflectorInformer<V1Node> {
  readonly nodeName: string;

  constructor(opts: NodeInfoOptions) {
    if (!opts.nodeName) throw new Error('node info: a node name is required');
    const core = opts.kubeConfig.makeApiClient(CoreV1Api);
    super(
      new Reflector<V1Node>({
        ...informerTuning(opts),
        name: `node ${opts.nodeName}`,
        watchPath: '/api/v1/nodes',
        list: (o) => core.listNode(o),
        fieldSelector: `metadata.name=${opts.nodeName}`,
        keyOf: (n) => n.metadata?.name ?? '',
      }),
    );
    this.nodeName = opts.nodeName;
  }

  waitForSync(timeoutMs: number): Promise<boolean> {
    return this.reflector.waitForSync(timeoutMs);
  }

  /** The node object, or undefined before sync or while it does not exist. */
  node(): V1Node | undefined {
    return this.reflector.get(this.nodeName);
  }

  /** Like node(), but an error naming what is missing. */
  getNode(): V1Node {
    const n = this.node();
    if (n) return n;
    if (!this.hasSynced()) throw new Error(`node "${this.nodeName}" not synced yet`);
    throw new Error(`node "${this.nodeName}" not found`);
  }

  hostIPs(): string[] {
    return nodeHostIPs(this.getNode());
  }

  attachedVolumes(): Map<string, string> {
    return attachedVolumes(this.getNode());
  }

  /** labels/allocatable/hostIP for the volume host; undefined while the node is unknown. */
  snapshot(): NodeSnapshot | undefined {
    const n = this.node();
    if (!n) return undefined;
    let hostIPs: string[] = [];
    try {
      hostIPs = nodeHostIPs(n);
    } catch {
      // No usable address yet (kubelet has not posted status): no host IP.
    }
    return {
      labels: { ...(n.metadata?.labels ?? {}) },
      allocatable: { ...(n.status?.allocatable ?? {}) },
      hostIP: hostIPs[0],
      hostIPs,
    };
  }
}
