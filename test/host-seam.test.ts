// scripts/check-host-seam.mjs, the check `npm run lint` runs after the
// module-state check: outside the seams' implementations (and the listed
// files that are not volume work) src/ reaches no file, process or timer
// directly, and a tree that does fails, naming the file, the line and what.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../scripts/check-host-seam.mjs', import.meta.url));
const checkHostSeam = (...args: string[]) =>
  spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });

test('src/ reaches the host through its seams only (and every allowed file still needs its entry)', () => {
  const r = checkHostSeam();
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
});

test('a value import of node:fs, child_process or timers and a global timer call fail the check; types, comments, strings and methods pass', (t) => {
  const src = mkdtempSync(join(tmpdir(), 'host-seam-'));
  t.after(() => rmSync(src, { recursive: true, force: true }));
  const files: Record<string, string> = {
    'plugins/raw.ts': [
      "import { readFile } from 'node:fs/promises';",
      "import * as fs from 'fs';",
      "export { spawn } from 'node:child_process';",
      "const timers = await import('node:timers/promises');",
      'setTimeout(() => {}, 10);',
      'const t = setInterval(() => {}, 10);',
      '',
    ].join('\n'),
    'volumehost/clean.ts': [
      "import type { Stats } from 'node:fs';",
      "// import { readFile } from 'node:fs'; setTimeout(f, 1)",
      'const text = "import \'node:child_process\'; setInterval(g, 2)";',
      'socket.setTimeout(5000, () => socket.destroy());',
      'clock.after(10, () => {});',
      "import { join } from 'node:path';",
      '',
    ].join('\n'),
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(src, path)), { recursive: true });
    writeFileSync(join(src, path), text);
  }
  const r = checkHostSeam(src);
  assert.equal(r.status, 1);
  assert.deepEqual(r.stderr.trim().split('\n').slice(0, -1), [
    'plugins/raw.ts:1: imports node:fs/promises',
    'plugins/raw.ts:2: imports fs',
    'plugins/raw.ts:3: imports node:child_process',
    'plugins/raw.ts:4: imports node:timers/promises',
    'plugins/raw.ts:5: calls the global setTimeout (take a Clock)',
    'plugins/raw.ts:6: calls the global setInterval (take a Clock)',
  ]);
});
