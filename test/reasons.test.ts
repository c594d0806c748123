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

// The catalogue's table lives in docs/reasons.md; the permanent reasons are
// listed where a runtime reads about its wait, docs/runtime-contract.md.
const section = readFileSync(new URL('../docs/reasons.md', import.meta.url), 'utf8');
const contract = readFileSync(new URL('../docs/runtime-contract.md', import.meta.url), 'utf8');

test('every reason of the catalogue is documented in docs/reasons.md, in its table', () => {
  assert.ok(section.startsWith('# Reasons'), 'docs/reasons.md is the reasons catalogue');
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

test('docs/reasons.md documents no reason the catalogue does not have', () => {
  const known = new Set(
    [volumeReasons, sourceReasons, runtimeReasons, apiReasons, drainReasons].flatMap((c) => Object.keys(c)),
  );
  for (const m of section.matchAll(/^\| `([A-Za-z]+)` \|/gm)) assert.ok(known.has(m[1] ?? ''), m[1]);
});

test('docs/runtime-contract.md lists exactly the permanent reasons that end a wait at once', () => {
  const para = contract.slice(contract.indexOf('**Permanent failures.**'));
  const listed = para.slice(0, para.indexOf('(the `permanentVolumeReasons`'));
  const names = [...listed.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]);
  assert.deepEqual(new Set(names), new Set(permanentVolumeReasons));
});
