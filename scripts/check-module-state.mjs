// `npm run lint` runs this after the layer check: no module of src/ holds
// mutable state at its top level. State lives in the objects the agent builds
// and passes down (a VolumeHost, a SafeFs, a VolumeManager), so two of them in
// one process (tests, `podvol plan` beside the daemon's code) never share it.
// Refused at a module's top level (outside every function, class and block):
//
//   - `let` and `var`;
//   - `new WeakMap`, `new WeakSet`, `new AsyncLocalStorage`: they exist to be
//     written;
//   - `new Map` and `new Set` unless the declaration is typed ReadonlyMap /
//     ReadonlySet: a constant lookup table says so in its type, and then tsc
//     refuses any write to it.
//
// It reads the source with comments and strings blanked (check-layers.mjs'
// scanner), not a parse: a top-level object literal or array that is mutated
// is not caught, nor is a class's static field (inside the class body).
//
// Usage: node scripts/check-module-state.mjs [src-dir]   (default: src of this repo)
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { blank, sourceFiles } from './check-layers.mjs';

/**
 * Files allowed to break the rule, each with its reason. Keep it short: an
 * entry is a to-do, not a licence.
 */
const EXCEPTIONS = new Map([]);

const ALWAYS = new Set(['WeakMap', 'WeakSet', 'AsyncLocalStorage']);
const TOKEN = /\b(let|var)\s|\bnew\s+(Map|Set|WeakMap|WeakSet|AsyncLocalStorage)\b/g;

// The offsets of `text` at brace, paren and bracket depth 0: the module's top level.
function depths(text) {
  const out = new Int32Array(text.length);
  let d = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '}' || c === ')' || c === ']') d--;
    out[i] = d;
    if (c === '{' || c === '(' || c === '[') d++;
  }
  return out;
}

// The problems of one file's source, each `line: what`.
export function moduleStateOf(source) {
  const text = blank(source);
  const depth = depths(text);
  const problems = [];
  for (const m of text.matchAll(TOKEN)) {
    if (depth[m.index] !== 0) continue;
    const line = text.slice(0, m.index).split('\n').length;
    if (m[1] !== undefined) {
      problems.push(`${line}: top-level \`${m[1]}\``);
      continue;
    }
    const kind = m[2];
    // The declaration this `new` initialises, from its `const` (none if a `;` ends one before it).
    const from = text.lastIndexOf('const ', m.index);
    const decl = from === -1 ? '' : text.slice(from, m.index);
    const declared = decl !== '' && !decl.includes(';');
    // A factory (`const f = () => new Map()`) makes a new one per call.
    if (declared && decl.includes('=>')) continue;
    if (!ALWAYS.has(kind) && declared && new RegExp(`:\\s*Readonly${kind}\\s*<`).test(decl)) continue;
    problems.push(
      `${line}: top-level \`new ${kind}\`${ALWAYS.has(kind) ? '' : ` (type it Readonly${kind} if it is a constant)`}`,
    );
  }
  return problems;
}

// The violations in srcDir, each a line naming the file, the line and the rule.
export function checkModuleState(srcDir, exceptions = EXCEPTIONS) {
  const problems = [];
  for (const file of sourceFiles(srcDir).sort()) {
    const from = relative(srcDir, file);
    const found = moduleStateOf(readFileSync(file, 'utf8'));
    if (!exceptions.has(from)) for (const p of found) problems.push(`${from}:${p}`);
    // An exception outlives its reason unnoticed otherwise.
    else if (found.length === 0)
      problems.push(`${from}: listed in EXCEPTIONS but has no module-level state: drop it`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const srcDir = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '../src'));
  const problems = checkModuleState(srcDir);
  for (const p of problems) console.error(p);
  if (problems.length > 0) {
    console.error(
      `check-module-state: ${problems.length} problem(s): module-level state belongs in the objects that are passed down`,
    );
    process.exit(1);
  }
}
