// The runtime API's errors: an HTTP status, a stable CamelCase reason and a
// message (kubelet's text where kubelet has one). The body is
// {"reason","message"} plus whatever the endpoint adds (the volumes of a pod
// that is not ready).
import type { RuntimeReason } from '../../reasons.ts';

export class RuntimeApiError extends Error {
  readonly status: number;
  readonly reason: RuntimeReason;
  readonly extra: Record<string, unknown>;
  constructor(status: number, reason: RuntimeReason, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'RuntimeApiError';
    this.status = status;
    this.reason = reason;
    this.extra = extra;
  }
}

export const notFound = (reason: 'PodNotFound' | 'ContainerNotFound', message: string) =>
  new RuntimeApiError(404, reason, message);

/** The pod spec asks for something kubelet refuses (422). */
export const invalidMount = (reason: RuntimeReason, message: string) =>
  new RuntimeApiError(422, reason, message);
