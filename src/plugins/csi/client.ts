// kubelet's csiClient (csi_client.go): one method per CSI Node/Identity call,
// each on a fresh unix-socket connection with a two-minute deadline. Requests
// use the proto's field names; responses come back with proto defaults filled.
import type { CSIProto } from './grpc.ts';
import { type CSIProtoSource, codeName, csiCallTimeoutMs, csiProtoOf, grpcCode } from './grpc-status.ts';

export type AccessMode =
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export type NodeCapability =
  | 'STAGE_UNSTAGE_VOLUME'
  | 'GET_VOLUME_STATS'
  | 'EXPAND_VOLUME'
  | 'VOLUME_CONDITION'
  | 'SINGLE_NODE_MULTI_WRITER'
  | 'VOLUME_MOUNT_GROUP';

export interface VolumeCapability {
  mount?: { fs_type: string; mount_flags: string[]; volume_mount_group: string };
  block?: Record<string, never>;
  access_mode: { mode: AccessMode };
}

export interface NodeStageRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  volume_capability: VolumeCapability;
  secrets: Record<string, string>;
  volume_context: Record<string, string>;
}

export interface NodePublishRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  target_path: string;
  volume_capability: VolumeCapability;
  readonly: boolean;
  secrets: Record<string, string>;
  volume_context: Record<string, string>;
}

export interface NodeGetInfoResponse {
  node_id: string;
  max_volumes_per_node: string;
  accessible_topology: { segments: Record<string, string> } | null;
}

export interface VolumeUsage {
  available: string;
  total: string;
  used: string;
  unit: 'UNKNOWN' | 'BYTES' | 'INODES';
}

export interface VolumeStats {
  usage: VolumeUsage[];
  volume_condition: { abnormal: boolean; message: string } | null;
}

export interface NodeExpandRequest {
  volume_id: string;
  volume_path: string;
  capacity_range: { required_bytes: string; limit_bytes: string };
  staging_target_path: string;
  volume_capability: VolumeCapability;
  secrets: Record<string, string>;
}

/** Observes every call (csi_operations_seconds): the full gRPC method name and Go's code name ("OK", "DeadlineExceeded"). */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/**
 * What the plugin calls a driver through: CSIClient over the driver's socket,
 * or `podvol plan`'s recording driver (src/agent/ops/plan-csi.ts).
 */
export type CSIDriverClient = Pick<
  CSIClient,
  | 'getPluginInfo'
  | 'nodeGetInfo'
  | 'nodeGetCapabilities'
  | 'nodeStageVolume'
  | 'nodeUnstageVolume'
  | 'nodePublishVolume'
  | 'nodeUnpublishVolume'
  | 'nodeGetVolumeStats'
  | 'nodeExpandVolume'
>;

export class CSIClient {
  readonly #proto: CSIProto | CSIProtoSource;
  readonly #endpoint: string;
  readonly #timeoutMs: number;
  readonly #observe: CallObserver | undefined;
  readonly #signal: AbortSignal | undefined;
  readonly #onStart: (() => void) | undefined;

  /** `onStart`/`observe` bracket every call; `signal`: aborting it cancels every call in flight and every later one (shutdown). */
  constructor(
    proto: CSIProto | CSIProtoSource,
    endpoint: string,
    opts: { timeoutMs?: number; observe?: CallObserver; onStart?: () => void; signal?: AbortSignal } = {},
  ) {
    this.#proto = proto;
    this.#endpoint = endpoint;
    this.#timeoutMs = opts.timeoutMs ?? csiCallTimeoutMs;
    this.#observe = opts.observe;
    this.#signal = opts.signal;
    this.#onStart = opts.onStart;
  }

  async #call<Res>(service: 'Identity' | 'Node', method: string, request: object): Promise<Res> {
    // gRPC is loaded with the first CSI call (grpc-status.ts says why).
    const [proto, { unary, unixClient }] = await Promise.all([csiProtoOf(this.#proto), import('./grpc.ts')]);
    const client = unixClient(proto[service], this.#endpoint);
    this.#onStart?.();
    const t0 = performance.now();
    try {
      const res = await unary<object, Res>(client, method, request, this.#timeoutMs, this.#signal);
      this.#observe?.(`/csi.v1.${service}/${method}`, 'OK', (performance.now() - t0) / 1000);
      return res;
    } catch (err) {
      const code = grpcCode(err);
      this.#observe?.(
        `/csi.v1.${service}/${method}`,
        code === undefined ? 'Unknown' : codeName(code),
        (performance.now() - t0) / 1000,
      );
      throw err;
    } finally {
      client.close();
    }
  }

  getPluginInfo(): Promise<{ name: string; vendor_version: string }> {
    return this.#call('Identity', 'GetPluginInfo', {});
  }

  nodeGetInfo(): Promise<NodeGetInfoResponse> {
    return this.#call('Node', 'NodeGetInfo', {});
  }

  async nodeGetCapabilities(): Promise<Set<NodeCapability>> {
    const res = await this.#call<{ capabilities: { rpc?: { type: NodeCapability } | null }[] }>(
      'Node',
      'NodeGetCapabilities',
      {},
    );
    const caps = new Set<NodeCapability>();
    for (const c of res.capabilities ?? []) if (c.rpc?.type) caps.add(c.rpc.type);
    return caps;
  }

  async nodeStageVolume(req: NodeStageRequest): Promise<void> {
    await this.#call('Node', 'NodeStageVolume', req);
  }

  async nodeUnstageVolume(volumeID: string, stagingTargetPath: string): Promise<void> {
    await this.#call('Node', 'NodeUnstageVolume', {
      volume_id: volumeID,
      staging_target_path: stagingTargetPath,
    });
  }

  async nodePublishVolume(req: NodePublishRequest): Promise<void> {
    await this.#call('Node', 'NodePublishVolume', req);
  }

  async nodeUnpublishVolume(volumeID: string, targetPath: string): Promise<void> {
    await this.#call('Node', 'NodeUnpublishVolume', { volume_id: volumeID, target_path: targetPath });
  }

  /** kubelet's csiDriverClient.NodeGetVolumeStats: the volume and the pod's target path, no staging_target_path. */
  nodeGetVolumeStats(volumeID: string, volumePath: string): Promise<VolumeStats> {
    return this.#call('Node', 'NodeGetVolumeStats', { volume_id: volumeID, volume_path: volumePath });
  }

  nodeExpandVolume(req: NodeExpandRequest): Promise<{ capacity_bytes: string }> {
    return this.#call('Node', 'NodeExpandVolume', req);
  }
}
