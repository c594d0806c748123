// npm run build:binary: podvol as one self-contained executable, dist/podvol.
//
// Node's single executable application support: esbuild bundles the CLI and
// every dependency into one CommonJS file, Node 24 (the `node` devDependency,
// whatever node runs this script) turns it into a SEA blob, and postject
// injects the blob into a copy of that same Node 24 binary. The result needs
// no Node, no node_modules and no source tree on the machine: copy it to
// /usr/local/bin/podvol. Data files the sources read next to themselves (the
// CSI .proto files) travel as SEA assets and are extracted on first use.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { commonOptions } from './build-bundle.mjs';
import { filterPostjectStderr } from './postject-output.ts';

const repo = join(import.meta.dirname, '..');
const dist = join(repo, 'dist');
const bundle = join(dist, 'podvol.cjs');
const blob = join(dist, 'podvol.blob');
const output = join(dist, 'podvol');
/** postject's marker in Node's binary (fixed by Node; see doc/api/single-executable-applications.md). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(
    `build:binary needs Node 24 (this is ${process.version}); run it through npm run build:binary`,
  );
  process.exit(1);
}

/** Files under src/ that are not code but read at run time relative to their module. */
function dataFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return dataFiles(p);
    return /\.(ts|js|json|md)$/.test(e.name) ? [] : [p];
  });
}

// import.meta.dirname of a module under src/ becomes a directory where that
// module's data files are (moduleDirPlugin): in the executable, extracted from the SEA assets.
const banner = `"use strict";
const __podvolAssets = { dir: undefined };
function __podvolModuleDir(rel) {
  const { join } = require('node:path');
  const sea = require('node:sea');
  if (!sea.isSea()) return join(__dirname, '..', 'src', rel);
  // Assets are keyed by their path in the repository (src/..., native/...).
  if (__podvolAssets.dir === undefined) {
    const fs = require('node:fs');
    const os = require('node:os');
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'podvol-assets-'));
    for (const key of sea.getAssetKeys()) {
      fs.mkdirSync(join(dir, require('node:path').dirname(key)), { recursive: true, mode: 0o700 });
      fs.writeFileSync(join(dir, key), Buffer.from(sea.getAsset(key)), { mode: 0o600 });
    }
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    __podvolAssets.dir = dir;
  }
  return join(__podvolAssets.dir, 'src', rel);
}
/** A file URL in the module's directory: what import.meta.url gives relative URLs to resolve against. */
function __podvolModuleUrl(rel) {
  return require('node:url').pathToFileURL(require('node:path').join(__podvolModuleDir(rel), 'module.js')).href;
}`;

// Only this build's files: dist/bundle (npm run build) stays.
for (const f of [bundle, blob, output]) rmSync(f, { force: true });
mkdirSync(dist, { recursive: true });

const result = await build({
  ...commonOptions,
  entryPoints: [join(repo, 'scripts', 'sea-entry.ts')],
  outfile: bundle,
  format: 'cjs',
  target: `node${major}`,
  banner: { js: banner },
});
// import.meta is empty in a CommonJS bundle: a leftover use would break at run time, so it fails the build.
const metaUses = result.warnings.filter((w) => /import\.meta/.test(w.text));
if (metaUses.length > 0) {
  console.error(
    `build:binary: import.meta left in the bundle:\n${metaUses.map((w) => `  ${w.location?.file}:${w.location?.line}: ${w.text}`).join('\n')}`,
  );
  process.exit(1);
}

// Data files next to the sources, and native addons (native/*/build/*.node: loaded from the extracted copy).
const nativeAddons = readdirSync(join(repo, 'native'), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .flatMap((e) => {
    const build = join(repo, 'native', e.name, 'build');
    try {
      return readdirSync(build)
        .filter((n) => n.endsWith('.node'))
        .map((n) => join(build, n));
    } catch {
      return [];
    }
  });
const assets = Object.fromEntries(
  [...dataFiles(join(repo, 'src')), ...nativeAddons].map((f) => [relative(repo, f), f]),
);
const seaConfig = join(dist, 'sea-config.json');
writeFileSync(
  seaConfig,
  JSON.stringify({
    main: bundle,
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache: false,
    assets,
  }),
);
execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'inherit' });

copyFileSync(process.execPath, output);
chmodSync(output, 0o755);
const postject = spawnSync(
  process.execPath,
  [
    join(repo, 'node_modules', 'postject', 'dist', 'cli.js'),
    output,
    'NODE_SEA_BLOB',
    blob,
    '--sentinel-fuse',
    SEA_FUSE,
  ],
  { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' },
);
if (postject.status !== 0) {
  // A failed injection shows everything postject said.
  process.stderr.write(postject.stderr ?? '');
  console.error(`build:binary: postject failed (${postject.error?.message ?? `exit ${postject.status}`})`);
  process.exit(1);
}
process.stderr.write(filterPostjectStderr(postject.stderr));
rmSync(blob);
rmSync(seaConfig);
const version = execFileSync(output, ['version'], { encoding: 'utf8' }).trim();
console.log(`built ${relative(repo, output)}: ${version}, ${Object.keys(assets).length} assets`);
