// gRPC plumbing shared by the CSI client, the registration watcher and the
// test driver: the two protos loaded once per caller, unix-socket clients
// with kubelet's authority and deadlines. Loading this module loads gRPC and
// protobuf (about 25 MiB and a good part of start-up), so podvol imports it
// only when a CSI driver registers or a CSI call is made (lazyCSIProto in
// grpc-status.ts); what must be known without it (status codes, kubelet's
// split of errors into final and uncertain) lives in grpc-status.ts.
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fieldOf } from '../../errno.ts';

// The CSI and plugin-registration .proto files, vendored from their specifications (not our code).
const protoDir = join(import.meta.dirname, 'vendor');

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

/** The client constructor of the service at a dotted path of a loaded .proto (`csi.v1.Node`). */
function serviceAt(pkg: grpc.GrpcObject, path: string): ServiceCtor {
  const found = path.split('.').reduce<unknown>((node, part) => fieldOf(node, part), pkg);
  if (!isServiceCtor(found)) throw new Error(`${path} is not a gRPC service of the loaded .proto`);
  return found;
}

function isServiceCtor(v: unknown): v is ServiceCtor {
  return typeof v === 'function' && 'service' in v;
}

export function loadCSIProto(): CSIProto {
  const def = protoLoader.loadSync(join(protoDir, 'csi.proto'), loaderOptions);
  const pkg = grpc.loadPackageDefinition(def);
  return { Identity: serviceAt(pkg, 'csi.v1.Identity'), Node: serviceAt(pkg, 'csi.v1.Node') };
}

export function loadRegistrationProto(): { Registration: ServiceCtor } {
  const def = protoLoader.loadSync(join(protoDir, 'pluginregistration.proto'), loaderOptions);
  return { Registration: serviceAt(grpc.loadPackageDefinition(def), 'pluginregistration.Registration') };
}

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

/**
 * Calls one unary method with a deadline and resolves with its response. An
 * aborted `signal` cancels the call (gRPC Canceled: the outcome is uncertain).
 */
export function unary<Req, Res>(
  client: grpc.Client,
  method: string,
  request: Req,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Res> {
  const fn = fieldOf(client, method);
  if (typeof fn !== 'function') return Promise.reject(new Error(`no gRPC method ${method}`));
  return new Promise<Res>((resolve, reject) => {
    const cancel = () => call.cancel();
    // Cast: grpc-js adds each method of the .proto to the client at run time, by name, with
    // this signature (a unary call); the types of Req and Res are the caller's word for the .proto's.
    const call = (
      fn as (
        r: Req,
        m: grpc.Metadata,
        o: grpc.CallOptions,
        cb: (e: grpc.ServiceError | null, r: Res) => void,
      ) => grpc.ClientUnaryCall
    ).call(client, request, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
      signal?.removeEventListener('abort', cancel);
      if (err) reject(err);
      else resolve(res);
    });
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
  });
}

/** Waits until the client's channel is connected, or rejects after `timeoutMs`. */
export function waitReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) =>
    client.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve())),
  );
}

export { codeName, describeGrpcError, grpcCode, isFinalError } from './grpc-status.ts';
export { grpc };
