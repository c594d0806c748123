// scripts/check-module-state.mjs, the check `npm run lint` runs after the
// layer check: src/ holds no mutable state at module level, and a tree that
// does fails, naming the file, the line and what is refused.
import { test } from 'node:test';
import { assertFailsWith, assertPassesOnSrc, lintScript, sourceTree } from './helpers/lint-script.ts';

const checkModuleState = lintScript('check-module-state.mjs');

test('src/ has no module-level mutable state', () => assertPassesOnSrc(checkModuleState));

test('a top-level let, a written collection or an AsyncLocalStorage fails the check; constants and function state pass', (t) => {
  const files: Record<string, string> = {
    'volumehost/held.ts': [
      "import { AsyncLocalStorage } from 'node:async_hooks';",
      'const held = new WeakSet<object>();',
      'const operations = new AsyncLocalStorage<number>();',
      'let lastId = 0;',
      'export const cache = new Map<string, number>();',
      '',
    ].join('\n'),
    'mount/constants.ts': [
      '// let x = 1; const y = new Map(); (a comment is no state)',
      "export const FLAGS: ReadonlySet<string> = new Set(['ro', 'rw']);",
      "const text = 'let z = new WeakMap()';",
      'export const byName: ReadonlyMap<string, number> = new Map([[text, 1]]);',
      'export const fresh = () => new WeakMap<object, number>();',
      'export function counter() {',
      '  let n = 0;',
      '  const seen = new Set<number>();',
      '  return () => seen.add(++n);',
      '}',
      'export class Registry {',
      '  readonly #byName = new Map<string, number>();',
      '}',
      'for (let i = 0; i < 1; i++) void i;',
      '',
    ].join('\n'),
  };
  const src = sourceTree(t, files);
  assertFailsWith(checkModuleState, src, [
    'volumehost/held.ts:2: top-level `new WeakSet`',
    'volumehost/held.ts:3: top-level `new AsyncLocalStorage`',
    'volumehost/held.ts:4: top-level `let`',
    'volumehost/held.ts:5: top-level `new Map` (type it ReadonlyMap if it is a constant)',
  ]);
});
