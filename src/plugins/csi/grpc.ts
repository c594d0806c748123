// gRPC plumbing shared by the CSI client, the registration watcher and the
// test driver: the two protos loaded once per caller, unix-socket clients
// with kubelet's authority and deadlines, and kubelet's split of gRPC errors
// into final and uncertain (csi_client.go isFinalError).
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoDir = join(import.meta.dirname, 'proto');

/** snake_case field names as in the .proto files; int64 as strings; enums by name; oneofs named. */
const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

type ServiceCtor = grpc.ServiceClientConstructor;

export interface CSIProto {
  Identity: ServiceCtor;
  Node: ServiceCtor;
}

export function loadCSIProto(): CSIProto {
  const def = protoLoader.loadSync(join(protoDir, 'csi.proto'), loaderOptions);
  const pkg = grpc.loadPackageDefinition(def) as unknown as { csi: { v1: CSIProto } };
  return pkg.csi.v1;
}

export function loadRegistrationProto(): { Registration: ServiceCtor } {
  const def = protoLoader.loadSync(join(protoDir, 'pluginregistration.proto'), loaderOptions);
  return (grpc.loadPackageDefinition(def) as unknown as { pluginregistration: { Registration: ServiceCtor } })
    .pluginregistration;
}

/** kubelet's csiTimeout: every CSI call gets two minutes. */
export const csiCallTimeoutMs = 2 * 60_000;
/** kubelet's plugin watcher: 10 s to dial a registration socket, 1 s for GetInfo. */
export const registrationDialTimeoutMs = 10_000;
export const registrationCallTimeoutMs = 1_000;

/**
 * A client on a unix socket with authority "localhost", as kubelet dials it.
 * The caller closes it; CSI calls use a fresh one each (kubelet's newGrpcConn).
 */
export function unixClient(ctor: ServiceCtor, socketPath: string): grpc.Client {
  return new ctor(`unix:${socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': 'localhost',
    // One connection per call: never share a subchannel with an earlier, possibly dead, driver process.
    'grpc.use_local_subchannel_pool': 1,
  });
}

/** Calls one unary method with a deadline and resolves with its response. */
export function unary<Req, Res>(
  client: grpc.Client,
  method: string,
  request: Req,
  timeoutMs: number,
): Promise<Res> {
  const fn = (client as unknown as Record<string, unknown>)[method];
  if (typeof fn !== 'function') return Promise.reject(new Error(`no gRPC method ${method}`));
  return new Promise<Res>((resolve, reject) => {
    (
      fn as (
        r: Req,
        m: grpc.Metadata,
        o: grpc.CallOptions,
        cb: (e: grpc.ServiceError | null, r: Res) => void,
      ) => void
    ).call(client, request, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

/** Waits until the client's channel is connected, or rejects after `timeoutMs`. */
export function waitReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) =>
    client.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve())),
  );
}

export function grpcCode(err: unknown): grpc.status | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'number' && 'details' in err) {
    return err.code as grpc.status;
  }
  return undefined;
}

const uncertainCodes = new Set<grpc.status>([
  grpc.status.CANCELLED,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.UNAVAILABLE,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.ABORTED,
]);

/**
 * kubelet's isFinalError: a gRPC status other than Canceled, DeadlineExceeded,
 * Unavailable, ResourceExhausted or Aborted means the driver finished the
 * call and refused it. Anything else (those codes, or an error that is not a
 * gRPC status at all) leaves the volume's state uncertain.
 */
export function isFinalError(err: unknown): boolean {
  const code = grpcCode(err);
  if (code === undefined) return false;
  return !uncertainCodes.has(code);
}

/** kubelet's wording for a gRPC error: "rpc error: code = NotFound desc = ...". */
export function describeGrpcError(err: unknown): string {
  const code = grpcCode(err);
  if (code === undefined) return (err as Error)?.message ?? String(err);
  const e = err as grpc.ServiceError;
  return `rpc error: code = ${codeName(code)} desc = ${e.details}`;
}

/** Go's codes.Code String(): "DeadlineExceeded", not grpc-js' "DEADLINE_EXCEEDED". */
export function codeName(code: grpc.status): string {
  const raw = grpc.status[code] ?? String(code);
  if (raw === 'OK') return 'OK';
  if (raw === 'CANCELLED') return 'Canceled';
  return raw
    .toLowerCase()
    .split('_')
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join('');
}

export { grpc };
