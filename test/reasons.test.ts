import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  apiReasons,
  drainReasons,
  permanentVolumeReasons,
  runtimeReasons,
  sourceReasons,
  volumeReasons,
} from '../src/reasons.ts';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const section = readme.slice(
  readme.indexOf('### Reasons'),
  readme.indexOf('\n## ', readme.indexOf('### Reasons')),
);

test('every reason of the catalogue is documented in the README, once, in its table', () => {
  assert.ok(section.length > 0, 'README has a "### Reasons" section');
  for (const [catalogue, reasons] of [
    ['volume', volumeReasons],
    ['source', sourceReasons],
    ['runtime API', runtimeReasons],
    ['API', apiReasons],
    ['drain', drainReasons],
  ] as const) {
    for (const reason of Object.keys(reasons)) {
      assert.match(
        section,
        new RegExp(`^\\| \`${reason}\` \\| .+ \\|$`, 'm'),
        `${catalogue} reason ${reason}`,
      );
    }
  }
});

test('the README documents no reason the catalogue does not have', () => {
  const known = new Set(
    [volumeReasons, sourceReasons, runtimeReasons, apiReasons, drainReasons].flatMap((c) => Object.keys(c)),
  );
  for (const m of section.matchAll(/^\| `([A-Za-z]+)` \|/gm)) assert.ok(known.has(m[1] ?? ''), m[1]);
});

test('the README lists exactly the permanent reasons that end a wait at once', () => {
  const para = readme.slice(readme.indexOf('**Permanent failures.**'));
  const listed = para.slice(0, para.indexOf('(the `permanentVolumeReasons`'));
  const names = [...listed.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]);
  assert.deepEqual(new Set(names), new Set(permanentVolumeReasons));
});
