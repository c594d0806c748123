// scripts/check-module-state.mjs, the check `npm run lint` runs after the
// layer check: src/ holds no mutable state at module level, and a tree that
// does fails, naming the file, the line and what is refused.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../scripts/check-module-state.mjs', import.meta.url));
const checkModuleState = (...args: string[]) =>
  spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });

test('src/ has no module-level mutable state', () => {
  const r = checkModuleState();
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
});

test('a top-level let, a written collection or an AsyncLocalStorage fails the check; constants and function state pass', (t) => {
  const src = mkdtempSync(join(tmpdir(), 'module-state-'));
  t.after(() => rmSync(src, { recursive: true, force: true }));
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
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(src, path)), { recursive: true });
    writeFileSync(join(src, path), text);
  }
  const r = checkModuleState(src);
  assert.equal(r.status, 1);
  assert.deepEqual(r.stderr.trim().split('\n').slice(0, -1), [
    'volumehost/held.ts:2: top-level `new WeakSet`',
    'volumehost/held.ts:3: top-level `new AsyncLocalStorage`',
    'volumehost/held.ts:4: top-level `let`',
    'volumehost/held.ts:5: top-level `new Map` (type it ReadonlyMap if it is a constant)',
  ]);
});
