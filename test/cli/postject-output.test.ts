// npm run build:binary shows postject's output without the nine LIEF note
// warnings every injection into Node 24 prints (taken from a real run), in one line.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { filterPostjectStderr } from '../../scripts/postject-output.ts';

const note100 = "warning: Can't find string offset for section name '.note.100'";
const realRun = `${[...Array(5).fill(note100), "warning: Can't find string offset for section name '.note'", ...Array(3).fill(note100)].join('\n')}\n`;

test("build:binary: postject's known note warnings become one line; anything else stays", () => {
  assert.equal(
    filterPostjectStderr(realRun),
    `postject: 9 warnings "Can't find string offset for section name '.note…'" hidden: LIEF does not know Node's ELF note names; the injection is unaffected\n`,
  );
  assert.equal(
    filterPostjectStderr(`${note100}\nwarning: The signature seems corrupted!\n`),
    `warning: The signature seems corrupted!\npostject: 1 warnings "Can't find string offset for section name '.note…'" hidden: LIEF does not know Node's ELF note names; the injection is unaffected\n`,
  );
  assert.equal(filterPostjectStderr(''), '');
});
