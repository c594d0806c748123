// The error the VolumeHost's API-backed functions (secrets, configMaps, tokens,
// trust bundles) reject with, so plugins branch on a reason, never on message text.

/** What went wrong talking to (or without) the API server, as callers branch on it. */
export type ApiReason =
  | 'NotFound'
  | 'Forbidden'
  | 'Unauthorized'
  | 'Conflict'
  | 'Gone'
  | 'Invalid'
  | 'TooManyRequests'
  | 'ServerError'
  | 'Unreachable'
  /** An object podvol does not watch for this pod (kubelet's `object "ns"/"name" not registered`). */
  | 'NotRegistered'
  /** The object's watch has not listed successfully in time. */
  | 'NotSynced'
  /** podvol runs without an API server. */
  | 'StandaloneMode';

/** A failed API-backed call: the reason and HTTP code are data, the message is for people. */
export class ApiError extends Error {
  readonly reason: ApiReason;
  readonly code: number | undefined;
  constructor(reason: ApiReason, message: string, options?: { code?: number; cause?: unknown }) {
    super(message, { cause: options?.cause });
    this.name = 'ApiError';
    this.reason = reason;
    this.code = options?.code;
  }
}
