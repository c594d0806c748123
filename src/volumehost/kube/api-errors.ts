// How a failed API call (client-node's ApiException, a Watch error, a fetch
// error) is classified: a stable reason, the HTTP code when there was one, and a
// message naming the resource and the server.

/** Why the last list or watch failed; `reason` is stable CamelCase, `message` names the resource and server. */
export interface ReflectorError {
  reason: 'Unauthorized' | 'Forbidden' | 'Unreachable' | 'Expired' | 'ServerError' | 'WatchError';
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
  const m = (b as { message?: unknown } | undefined)?.message;
  return typeof m === 'string' ? m : undefined;
}

/** Turn a client-node failure (ApiException, Watch error, fetch error) into a precise ReflectorError. */
export function classifyError(what: string, server: string, err: unknown): ReflectorError {
  const e = err as {
    code?: unknown;
    statusCode?: unknown;
    body?: unknown;
    cause?: { code?: string; message?: string };
  };
  const code =
    typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
  const detail = statusMessage(e?.body);
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
  const cause = e?.cause?.code ?? e?.cause?.message ?? (err as Error)?.message ?? String(err);
  return {
    reason: 'Unreachable',
    at,
    message: `${what}: cannot reach the API server at ${server}: ${cause}`,
  };
}
