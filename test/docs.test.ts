// The documentation against the code: every flag of `podvol run --help` is in
// the flags table of docs/operating.md and every flag there exists; the README
// stays a front page; links between the docs lead to files and headings that
// exist; docs/performance.md names the benches npm run bench runs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const docFiles = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

function runHelp(): string {
  return execFileSync(join(root, 'node_modules/.bin/node'), [join(root, 'bin/podvol.js'), 'run', '--help'], {
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1' },
  });
}

/** The long flags of `podvol run --help`, without --help itself. */
function helpFlags(): Set<string> {
  const flags = new Set<string>();
  for (const line of runHelp().split('\n')) {
    // At the indent of a flag: a wrapped description line below one may start with a flag it names.
    const m = /^ {2}(?:-\w, )?(--[a-z][a-z-]*)/.exec(line);
    if (m?.[1] && m[1] !== '--help') flags.add(m[1]);
  }
  return flags;
}

/** The flags named in the first column of the flags table under "## Command line" in docs/operating.md. */
function documentedFlags(): Set<string> {
  const text = read('docs/operating.md');
  const start = text.indexOf('\n## Command line\n');
  assert.ok(start >= 0, 'docs/operating.md has a "## Command line" section');
  const section = text.slice(start + 1, text.indexOf('\n## ', start + 1));
  const lines = section.split('\n');
  const header = lines.findIndex((l) => /^\| flag \| env \| default \|$/.test(l));
  assert.ok(header >= 0, 'the flags table has the header | flag | env | default |');
  const flags = new Set<string>();
  // The table is the run of lines starting with '|' after the header: a blank line ends it (and would break it).
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const first = line.split(' | ')[0] ?? '';
    for (const m of first.matchAll(/--[a-z][a-z-]*/g)) flags.add(m[0]);
  }
  return flags;
}

describe('podvol run flags', () => {
  const help = helpFlags();
  const documented = documentedFlags();

  test('--help lists the flags (the parse of it works)', () => {
    assert.ok(help.has('--root-dir') && help.has('--max-concurrent-operations'), [...help].join(' '));
  });

  test('every flag of podvol run --help is in the flags table of docs/operating.md', () => {
    const missing = [...help].filter((f) => !documented.has(f));
    assert.deepEqual(missing, [], `undocumented: ${missing.join(', ')}`);
  });

  test('every flag of the table exists in podvol run --help', () => {
    const unknown = [...documented].filter((f) => !help.has(f));
    assert.deepEqual(unknown, [], `documented but not in --help: ${unknown.join(', ')}`);
  });

  test('the podvol run synopsis names every flag', () => {
    const text = read('docs/operating.md');
    const synopsis = text.slice(text.indexOf('podvol run ['), text.indexOf('podvol status ['));
    const missing = [...help].filter(
      (f) => !new RegExp(`\\[${f}[ =[\\]]`).test(synopsis) && !synopsis.includes(`${f} `),
    );
    assert.deepEqual(missing, [], `not in the synopsis: ${missing.join(', ')}`);
  });
});

describe('README.md', () => {
  const readme = read('README.md');

  test('is a front page: at most 260 lines', () => {
    const lines = readme.split('\n').length;
    assert.ok(lines <= 260, `README.md has ${lines} lines`);
  });

  test('has the two commands, and CI runs them', () => {
    assert.match(readme, /^npm ci && npm start {5}#/m);
    assert.match(readme, /^npm ci && npm test {6}#/m);
    const ci = read('.ci/run');
    assert.match(ci, /^npm ci\b/m);
    assert.match(ci, /^npm test$/m);
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(path: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of read(path).split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.+)$/.exec(line);
    if (m?.[1]) out.add(slug(m[1]));
  }
  return out;
}

describe('links in README.md and docs/', () => {
  for (const file of docFiles) {
    test(`${file} links only to files and headings that exist`, () => {
      const text = read(file).replace(/```[\s\S]*?```/g, '');
      const broken: string[] = [];
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] ?? '';
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [path = '', anchor] = target.split('#');
        const resolved = path === '' ? file : relative(root, join(root, dirname(file), path));
        if (!existsSync(join(root, resolved))) {
          broken.push(`${target} (no ${resolved})`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
          broken.push(`${target} (no heading #${anchor} in ${resolved})`);
      }
      assert.deepEqual(broken, []);
    });
  }
});

// `npm ci` runs on the system's Node (20 on Debian), though every npm script and
// bin/podvol.js run the Node 24 of node_modules: package.json must admit the Node
// npm runs under, and say which install scripts may run (npm 11's allowScripts),
// or every install warns EBADENGINE and "install scripts not yet covered".
describe('package.json for npm ci under the system Node', () => {
  const pkg = JSON.parse(read('package.json'));
  const lock = JSON.parse(read('package-lock.json'));

  test('engines admits Node 20, which the README says is enough to run npm ci', () => {
    assert.match(read('README.md'), /a machine with only Node 20 and npm works/);
    const m = /^>=(\d+)(?:\.(\d+))?$/.exec(pkg.engines?.node ?? '');
    assert.ok(m, `engines.node is a plain lower bound: ${pkg.engines?.node}`);
    assert.ok(Number(m[1]) <= 20, `engines.node ${pkg.engines.node} refuses Node 20`);
  });

  test('allowScripts decides on every package with an install script in package-lock.json', () => {
    const withScripts = Object.entries(lock.packages as Record<string, { hasInstallScript?: boolean }>)
      .filter(([path, p]) => path !== '' && p.hasInstallScript)
      .map(([path]) => path.replace(/^.*node_modules\//, ''))
      .sort();
    assert.deepEqual(withScripts, Object.keys(pkg.allowScripts ?? {}).sort());
  });
});

// docs/performance.md's table of the benches is what `npm run bench` runs:
// every bench of bench/run.ts is named in it, and every bench file it names exists.
describe('docs/performance.md and the benches', () => {
  const section = (() => {
    const text = read('docs/performance.md');
    const start = text.indexOf('\n## The benches\n');
    assert.ok(start >= 0, 'docs/performance.md has a "## The benches" section');
    return text.slice(start + 1, text.indexOf('\n## ', start + 1));
  })();

  test('names every bench npm run bench runs', async () => {
    const { benches } = await import('../bench/run.ts');
    const missing = benches.map((b) => `bench/${b.file}`).filter((f) => !section.includes(`\`${f}`));
    assert.deepEqual(missing, []);
  });

  test('names only bench files that exist', () => {
    const named = [...section.matchAll(/`(bench\/[\w.-]+\.ts)/g)].map((m) => m[1] ?? '');
    assert.ok(named.length > 0, 'the section names bench files');
    assert.deepEqual(
      named.filter((f) => !existsSync(join(root, f))),
      [],
    );
  });
});
