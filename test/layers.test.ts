// scripts/check-layers.mjs, the layering check `npm run lint` runs: it passes
// on src/ and fails, naming the file, the import and the rule, on a tree with
// imports against the direction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertPassesOnSrc, lintScript, sourceTree } from './helpers/lint-script.ts';

const checkLayers = lintScript('check-layers.mjs');

test('src/ imports only inward', () => assertPassesOnSrc(checkLayers));

test('an import against the direction fails the check, which names the file, the import and the rule', (t) => {
  const files: Record<string, string> = {
    'errno.ts': "import { x } from './mount/a.ts';\n",
    'mount/a.ts': "export const x = 1;\n// import { y } from '../agent/b.ts'; (a comment is no import)\n",
    'volumehost/host.ts': "export type { P } from '../plugins/p.ts';\nconst s = \"from '../cli/c.ts'\";\n",
    'plugins/p.ts': "import { x } from '../mount/a.ts';\nexport type P = typeof x;\n",
    'agent/b.ts':
      "import type { P } from '../plugins/p.ts';\nexport const y = async () => import('../cli/c.ts');\n",
    'cli/c.ts': "import { y } from '../agent/b.ts';\nexport { y };\n",
    'stray.ts': 'export {};\n',
  };
  const src = sourceTree(t, files);
  const r = checkLayers(src);
  assert.equal(r.status, 1);
  assert.deepEqual(r.stderr.trim().split('\n'), [
    "agent/b.ts:2: imports '../cli/c.ts' (cli), but agent may import only from shared, mount, volumehost, plugins, agent",
    "errno.ts:1: imports './mount/a.ts' (mount), but shared may import only from shared",
    'stray.ts: in no layer (shared → mount → volumehost → plugins → agent → cli): move it into one or list it in SHARED',
    "volumehost/host.ts:1: imports '../plugins/p.ts' (plugins), but volumehost may import only from shared, mount, volumehost",
    'check-layers: 4 problem(s); the layers, innermost first: shared → mount → volumehost → plugins → agent → cli',
  ]);
});
