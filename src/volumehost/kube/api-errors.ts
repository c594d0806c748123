// How a failed API call (client-node's ApiException, a Watch error, a fetch
// error) is classified: a stable reason, the HTTP code when there was one, and a
// message naming the resource and the server. Callers decide on `reason` and
// `code`, never on the wording of a message.

import { errorMessage, fieldOf } from '../../errno.ts';
import type { ApiReason, SourceReason } from '../../reasons.ts';
import { ApiError } from '../errors.ts';

/** Why the last list or watch failed; `reason` is stable CamelCase, `message` names the resource and server. */
export interface ReflectorError {
  reason: Extract<
    SourceReason,
    'Unauthorized' | 'Forbidden' | 'Unreachable' | 'Expired' | 'ServerError' | 'WatchError'
  >;
  message: string;
  code?: number;
  at: Date;
}

export function statusMessage(body: unknown): string | undefined {
  let b = body;
  if (typeof b === 'string') {
    try {
      b = JSON.parse(b);
    } catch {
      return undefined;
    }
  }
  const m = fieldOf(b, 'message');
  return typeof m === 'string' ? m : undefined;
}

/** Turn a client-node failure (ApiException, Watch error, fetch error) into a precise ReflectorError. */
export function classifyError(what: string, server: string, err: unknown): ReflectorError {
  const code = kubeErrorCode(err);
  const detail = statusMessage(fieldOf(err, 'body'));
  const at = new Date();
  if (code === 401) {
    return {
      reason: 'Unauthorized',
      code,
      at,
      message: `${what}: 401 Unauthorized from ${server}: the API server rejected the credentials (check the kubeconfig or service account token)`,
    };
  }
  if (code === 403) {
    return {
      reason: 'Forbidden',
      code,
      at,
      message: `${what}: 403 Forbidden from ${server}${detail ? `: ${detail}` : ''}`,
    };
  }
  if (code === 410)
    return { reason: 'Expired', code, at, message: `${what}: 410 Gone: resourceVersion too old` };
  if (code !== undefined) {
    return {
      reason: 'ServerError',
      code,
      at,
      message: `${what}: HTTP ${code} from ${server}${detail ? `: ${detail}` : ''}`,
    };
  }
  const cause = fieldOf(err, 'cause');
  const causeText = [fieldOf(cause, 'code'), fieldOf(cause, 'message')].find((v) => typeof v === 'string');
  return {
    reason: 'Unreachable',
    at,
    message: `${what}: cannot reach the API server at ${server}: ${causeText ?? errorMessage(err)}`,
  };
}

/** HTTP status of a client-node ApiException or Watch error (`code` or `statusCode`). */
export function kubeErrorCode(err: unknown): number | undefined {
  const code = fieldOf(err, 'code');
  const statusCode = fieldOf(err, 'statusCode');
  return typeof code === 'number' ? code : typeof statusCode === 'number' ? statusCode : undefined;
}

const STATUS_WORDS: Record<number, string> = {
  401: 'Unauthorized',
  403: 'forbidden',
  404: 'not found',
  409: 'already exists',
  410: 'gone',
  422: 'invalid',
  429: 'too many requests',
};

/**
 * A one-line description of a client-node error without its headers or request body:
 * the API server's Status message when there is one (which, like Go's StatusError, reads
 * `... is forbidden: User ...`), otherwise the HTTP status, otherwise the transport error.
 */
export function describeKubeError(err: unknown): string {
  const code = kubeErrorCode(err);
  if (code !== undefined && typeof err === 'object' && err !== null && 'body' in err) {
    const message = statusMessage(err.body);
    if (message) return message;
    return `${STATUS_WORDS[code] ?? 'request failed'} (HTTP ${code})`;
  }
  if (err instanceof Error) {
    const causeText = err.cause instanceof Error ? err.cause.message : undefined;
    return causeText && causeText !== err.message ? `${err.message}: ${causeText}` : err.message;
  }
  return String(err);
}

const REASON_BY_CODE: Record<number, ApiReason> = {
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Gone',
  422: 'Invalid',
  429: 'TooManyRequests',
};

/**
 * Any failure of an API call as an ApiError: an ApiError keeps its reason and code,
 * a client-node error gets them from its HTTP status (none means unreachable).
 * `prefix` is prepended to the message, e.g. `failed to fetch token: `.
 */
export function toApiError(err: unknown, prefix = ''): ApiError {
  if (err instanceof ApiError) {
    return prefix === ''
      ? err
      : new ApiError(err.reason, prefix + err.message, { code: err.code, cause: err });
  }
  const code = kubeErrorCode(err);
  const reason = code === undefined ? 'Unreachable' : (REASON_BY_CODE[code] ?? 'ServerError');
  return new ApiError(reason, prefix + describeKubeError(err), { code, cause: err });
}
