// podvol's own JSON files read back: the volume records, the runtime contract's
// entries, the root directory's mark. Only podvol writes them, under its root
// directory, mode 0600; so a document whose identity fields check out (its
// version, whose it is) is taken as the type podvol wrote, without checking
// every other field. This is the one place that trusts a parsed document.

/**
 * Parses `text` and returns it as T when it is a JSON object `accept` takes;
 * undefined otherwise. Throws what JSON.parse throws.
 */
export function parseOwnDocument<T extends object>(
  text: string,
  accept: (doc: object) => boolean,
): T | undefined {
  const doc: unknown = JSON.parse(text);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc) || !accept(doc)) return undefined;
  return doc as T; // podvol wrote it (see above); `accept` checked what says so.
}
