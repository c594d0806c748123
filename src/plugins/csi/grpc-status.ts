// What podvol must know about gRPC without loading it: status codes and
// kubelet's split of gRPC errors into final and uncertain (csi_client.go
// isFinalError), and the CSI proto loaded on first use. A node without CSI
// never loads @grpc/grpc-js and protobufjs (grpc.ts): they cost start-up time
// and resident memory that a standalone node does not need.

import { Status } from '@grpc/grpc-js/build/src/constants.js';
import { errorMessage, fieldOf } from '../../errno.ts';
import type { CSIProto } from './grpc.ts';

/** The CSI proto, to be loaded when first needed. */
export type CSIProtoSource = () => Promise<CSIProto>;

/** A source that loads gRPC and the CSI proto on its first call, once. */
export function lazyCSIProto(): CSIProtoSource {
  let loading: Promise<CSIProto> | undefined;
  return () => {
    loading ??= import('./grpc.ts').then((m) => m.loadCSIProto());
    return loading;
  };
}

/** A proto given directly (tests, the test driver) or a lazy source. */
export function csiProtoOf(p: CSIProto | CSIProtoSource): Promise<CSIProto> {
  return typeof p === 'function' ? p() : Promise.resolve(p);
}

export { Status };

/** kubelet's csiTimeout: every CSI call gets two minutes. */
export const csiCallTimeoutMs = 2 * 60_000;
/** kubelet's plugin watcher: 10 s to dial a registration socket, 1 s for GetInfo. */
export const registrationDialTimeoutMs = 10_000;
export const registrationCallTimeoutMs = 1_000;

export function grpcCode(err: unknown): Status | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'number' && 'details' in err) {
    return err.code;
  }
  return undefined;
}

const uncertainCodes: ReadonlySet<Status> = new Set<Status>([
  Status.CANCELLED,
  Status.DEADLINE_EXCEEDED,
  Status.UNAVAILABLE,
  Status.RESOURCE_EXHAUSTED,
  Status.ABORTED,
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
  if (code === undefined) return errorMessage(err);
  return `rpc error: code = ${codeName(code)} desc = ${fieldOf(err, 'details')}`;
}

/** Go's codes.Code String(): "DeadlineExceeded", not grpc-js' "DEADLINE_EXCEEDED". */
export function codeName(code: Status): string {
  const raw = Status[code] ?? String(code);
  if (raw === 'OK') return 'OK';
  if (raw === 'CANCELLED') return 'Canceled';
  return raw
    .toLowerCase()
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
}
