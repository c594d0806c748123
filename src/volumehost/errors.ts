// The error the VolumeHost's API-backed functions (secrets, configMaps, tokens,
// trust bundles) reject with, so plugins branch on a reason, never on message text.

import type { ApiReason } from '../reasons.ts';

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
