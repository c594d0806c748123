// Reading a thrown value. A catch clause gets `unknown` (anything can be
// thrown: an Error, a Node system error, a client-node ApiException, a
// string); these functions are the one place that looks inside it, by
// checking rather than casting.

/** The errno code of a Node system error (`ENOENT`, `EBUSY`, ...); undefined for anything else. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

/** The message of an Error; anything else thrown, as text. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * One field of a value of unknown shape (a thrown value's `body`, `cause` or
 * `statusCode`, a parsed Status document's `message`); undefined when the value
 * is not an object. The caller checks the field's type before using it.
 */
export function fieldOf(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? Reflect.get(value, key) : undefined;
}
