// scripts/check-host-seam.mjs, the check `npm run lint` runs after the
// module-state check: outside the seams' implementations (and the listed
// files that are not volume work) src/ reaches no file, process or timer
// directly, and a tree that does fails, naming the file, the line and what.
import { test } from 'node:test';
import { assertFailsWith, assertPassesOnSrc, lintScript, sourceTree } from './helpers/lint-script.ts';

const checkHostSeam = lintScript('check-host-seam.mjs');

test('src/ reaches the host through its seams only (and every allowed file still needs its entry)', () =>
  assertPassesOnSrc(checkHostSeam));

test('a value import of node:fs, child_process or timers and a global timer call fail the check; types, comments, strings and methods pass', (t) => {
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
  const src = sourceTree(t, files);
  assertFailsWith(checkHostSeam, src, [
    'plugins/raw.ts:1: imports node:fs/promises',
    'plugins/raw.ts:2: imports fs',
    'plugins/raw.ts:3: imports node:child_process',
    'plugins/raw.ts:4: imports node:timers/promises',
    'plugins/raw.ts:5: calls the global setTimeout (take a Clock)',
    'plugins/raw.ts:6: calls the global setInterval (take a Clock)',
  ]);
});
