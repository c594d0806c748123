// npm's install hook: builds native/peercred (SO_PEERCRED for the runtime
// socket) with the C compiler and the Node-API headers from the
// node-api-headers package. Node-API is ABI-stable, so the result loads in
// any Node >= 18 whatever Node ran this script. Plain JavaScript on purpose:
// `npm ci --omit=dev` runs it with the machine's Node, which may not strip
// TypeScript types.
//
// A missing compiler is not an install failure: podvol then refuses to open
// its runtime socket (it cannot check who connects) and says why; every
// other part of podvol works.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'native/peercred/peercred.c');
const out = join(root, 'native/peercred/build/peercred.node');

function includeDirs() {
  const dirs = [];
  try {
    dirs.push(createRequire(import.meta.url)('node-api-headers').include_dir);
  } catch {}
  dirs.push('/usr/include/node', join(dirname(process.execPath), '../include/node'));
  return dirs.filter((d) => existsSync(join(d, 'node_api.h')));
}

const include = includeDirs()[0];
if (process.platform !== 'linux') {
  console.log('# peercred: not Linux, skipped (the runtime socket needs Linux)');
  process.exit(0);
}
if (!include) {
  console.warn(
    '# peercred: no node_api.h found (npm ci installs node-api-headers); the runtime socket will be unavailable',
  );
  process.exit(0);
}
mkdirSync(dirname(out), { recursive: true });
const cc = process.env.CC || 'cc';
const tmp = `${out}.tmp`;
const r = spawnSync(cc, ['-O2', '-Wall', '-fPIC', '-shared', '-I', include, '-o', tmp, src], {
  stdio: 'inherit',
  timeout: 120_000,
});
if (r.error || r.status !== 0) {
  console.warn(
    `# peercred: ${cc} failed (${r.error?.message ?? `exit ${r.status}`}); install a C compiler (Debian: gcc) and run npm rebuild, or podvol runs without its runtime socket`,
  );
  process.exit(0);
}
renameSync(tmp, out);
console.log(`# peercred: built ${out}`);
