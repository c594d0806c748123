// Reading a thrown value. A catch clause gets `unknown` (anything can be
// thrown: an Error, a Node system error, a string); these two functions are
// the one place that looks inside it, by checking rather than casting.

/** The errno code of a Node system error (`ENOENT`, `EBUSY`, ...); undefined for anything else. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

/** The message of an Error; anything else thrown, as text. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
