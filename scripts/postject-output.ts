// postject's LIEF prints one "Can't find string offset for section name
// '.note...'" warning per note section of Node's ELF binary (nine for Node 24)
// on every injection: LIEF's note parser does not know Node's note names, and
// the section it writes is unaffected. Shown as they are,
// they read as if the build had gone wrong; they are counted in one line
// instead, and anything else postject says is shown.

const HARMLESS = /^warning: Can't find string offset for section name '\.note(\.\d+)?'$/;

/** postject's stderr without the known harmless note warnings, and one line saying how many went. */
export function filterPostjectStderr(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l !== '');
  const kept = lines.filter((l) => !HARMLESS.test(l));
  const dropped = lines.length - kept.length;
  const note =
    dropped > 0
      ? [
          `postject: ${dropped} warnings "Can't find string offset for section name '.note…'" hidden: LIEF does not know Node's ELF note names; the injection is unaffected`,
        ]
      : [];
  return [...kept, ...note].map((l) => `${l}\n`).join('');
}
