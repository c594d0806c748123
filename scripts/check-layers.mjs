// `npm run lint` runs this before Biome: every import in src/ must point
// inward, down this list of layers (README, "Repository layout"):
//
//   shared     src/errno.ts clock.ts logger.ts reasons.ts version.ts own.ts addon.ts
//   mount      src/mount/       mount.Interface and its Linux implementation
//   volumehost src/volumehost/  the host and the plugin contract (kubelet's pkg/volume)
//   plugins    src/plugins/     the volume plugins
//   agent      src/agent/       the volume manager, pod sources, runtime API, daemon
//   cli        src/cli/ and src/cli.ts
//
// A file may import from its own layer and from any layer above it in the
// list, never from one below. The shared modules are the base: every layer may
// use them and they use nothing else of src/. A file of src/ in no layer fails
// too, so a new top-level module is placed on purpose.
//
// Plain JavaScript on purpose, like build-native.mjs: it parses imports with a
// small scanner rather than a TypeScript parser (typescript 7 ships none to
// JavaScript), which is enough because it only needs the module specifiers of
// `import … from`, `export … from`, bare `import '…'` and `import('…')`.
//
// Usage: node scripts/check-layers.mjs [src-dir]   (default: src of this repo)
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const LAYERS = ['shared', 'mount', 'volumehost', 'plugins', 'agent', 'cli'];
const SHARED = new Set([
  'errno.ts',
  'clock.ts',
  'logger.ts',
  'reasons.ts',
  'version.ts',
  'own.ts',
  'addon.ts',
]);

// The layer of a path relative to src/, or undefined for one in no layer.
function layerOf(path) {
  const [top, ...rest] = path.split(sep);
  if (rest.length === 0) return top === 'cli.ts' ? 'cli' : SHARED.has(top) ? 'shared' : undefined;
  return LAYERS.includes(top) && top !== 'shared' ? top : undefined;
}

// The source with comments and the contents of string and template literals
// blanked out (quotes kept), so that neither an import written in a comment
// nor a specifier-looking string fools the patterns below. Specifiers are read
// back from the original text at the same offsets.
export function blank(source) {
  let out = '';
  let i = 0;
  const n = source.length;
  while (i < n) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      const stop = end === -1 ? n : end;
      out += ' '.repeat(stop - i);
      i = stop;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end === -1 ? n : end + 2;
      out += source.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop;
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < n && source[j] !== c) j += source[j] === '\\' ? 2 : 1;
      out += c + source.slice(i + 1, j).replace(/[^\n]/g, ' ') + (j < n ? c : '');
      i = j + 1;
    } else {
      out += c;
      i += 1;
    }
  }
  return out;
}

// Every `from '…'` ends an import or export declaration (a `from` outside one
// is not followed by a string literal in TypeScript); `import '…'` is a
// side-effect import and `import('…')` a dynamic import or an import type.
const SPECIFIER = /\bfrom\s*(['"])|\bimport\s*(['"])|\bimport\s*\(\s*(['"])/g;

export function importsOf(source) {
  const blanked = blank(source);
  const found = [];
  for (const m of blanked.matchAll(SPECIFIER)) {
    const quote = m[1] ?? m[2] ?? m[3];
    const start = m.index + m[0].length;
    const end = blanked.indexOf(quote, start);
    const line = blanked.slice(0, m.index).split('\n').length;
    found.push({ specifier: source.slice(start, end), line });
  }
  return found;
}

export function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.[cm]?[jt]s$/.test(e.name) ? [p] : [];
  });
}

// The layers a file of `layer` may import from: its own and those before it;
// the shared modules only each other.
const allowedFrom = (layer) => (layer === 'shared' ? ['shared'] : LAYERS.slice(0, LAYERS.indexOf(layer) + 1));

// The violations in srcDir, each a line naming the file, the import and the rule.
export function checkLayers(srcDir) {
  const problems = [];
  for (const file of sourceFiles(srcDir).sort()) {
    const from = relative(srcDir, file);
    const fromLayer = layerOf(from);
    if (fromLayer === undefined) {
      problems.push(`${from}: in no layer (${LAYERS.join(' → ')}): move it into one or list it in SHARED`);
      continue;
    }
    const allowed = allowedFrom(fromLayer);
    for (const { specifier, line } of importsOf(readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('.')) continue; // a package or a node: builtin
      const to = relative(srcDir, resolve(dirname(file), specifier));
      if (to.startsWith('..')) continue; // outside src/, such as package.json
      const toLayer = layerOf(to);
      if (toLayer === undefined || allowed.includes(toLayer)) continue; // in no layer: reported at that file
      problems.push(
        `${from}:${line}: imports '${specifier}' (${toLayer}), but ${fromLayer} may import only from ${allowed.join(', ')}`,
      );
    }
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const srcDir = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '../src'));
  const problems = checkLayers(srcDir);
  for (const p of problems) console.error(p);
  if (problems.length > 0) {
    console.error(
      `check-layers: ${problems.length} problem(s); the layers, innermost first: ${LAYERS.join(' → ')}`,
    );
    process.exit(1);
  }
}
