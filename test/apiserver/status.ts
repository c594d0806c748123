// metav1.Status errors as the API server returns them.

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: { reason?: string; message?: string; field?: string }[];
}

const reasons: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  500: 'InternalError',
};

export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details?: StatusDetails;

  constructor(code: number, message: string, opts: { reason?: string; details?: StatusDetails } = {}) {
    super(message);
    this.code = code;
    this.reason = opts.reason ?? reasons[code] ?? 'Unknown';
    this.details = opts.details;
  }

  toStatus(): Record<string, unknown> {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

/** `resource` is the group-qualified plural, e.g. `pods` or `csidrivers.storage.k8s.io`. */
export function notFound(resource: string, name: string, group: string, plural: string): StatusError {
  return new StatusError(404, `${resource} "${name}" not found`, { details: { name, group, kind: plural } });
}

export function alreadyExists(resource: string, name: string, group: string, plural: string): StatusError {
  return new StatusError(409, `${resource} "${name}" already exists`, {
    reason: 'AlreadyExists',
    details: { name, group, kind: plural },
  });
}

export function conflict(resource: string, name: string, group: string, plural: string): StatusError {
  return new StatusError(
    409,
    `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { details: { name, group, kind: plural } },
  );
}

export function tooOld(requested: number, oldest: number): StatusError {
  return new StatusError(410, `too old resource version: ${requested} (${oldest})`);
}
