// npm run build (and npm's install hook): podvol's sources and dependencies
// bundled by esbuild into dist/bundle/, which bin/podvol.js runs instead of
// the TypeScript sources while the bundle is fresh. Measured
// (docs/performance.md): Node's type stripping and the resolution and loading of
// hundreds of small module files cost most of start-up and tens of MiB of
// resident memory that a bundle does not. Modules loaded on demand (the
// Kubernetes client, gRPC) stay in chunks of their own, loaded only when
// podvol imports them.
//
// bin/podvol.js decides whether the bundle is fresh (stamp.json below, written
// when the build starts); a source changed since, or a bundle that was never
// built, means the sources run, so a stale bundle never runs.
//
// Plain JavaScript on purpose: `npm ci --omit=dev` runs the install hook with
// the machine's Node, which may not strip types, and without esbuild (a
// devDependency): then there is no bundle and the sources run.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
export const bundleDir = join(repo, 'dist', 'bundle');

/**
 * import.meta.dirname and import.meta.url of a module under src/ become calls
 * to the bundle's banner functions, given the module's directory relative to
 * src/: the data files (CSI .proto) and native addons a module reads next to
 * itself stay where they are in the repository (or, in the single executable,
 * in its extracted assets).
 */
export const moduleDirPlugin = {
  name: 'podvol-module-dir',
  setup(b) {
    b.onLoad({ filter: /\/src\/.*\.ts$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.dirname') && !text.includes('import.meta.url')) return undefined;
      const rel = JSON.stringify(relative(join(repo, 'src'), dirname(args.path)));
      return {
        contents: text
          .replaceAll('import.meta.dirname', `__podvolModuleDir(${rel})`)
          .replaceAll('import.meta.url', `__podvolModuleUrl(${rel})`),
        loader: 'ts',
      };
    });
  },
};

/** What both bundles (this one and the single executable's) share. */
export const commonOptions = {
  bundle: true,
  platform: 'node',
  plugins: [moduleDirPlugin],
  // Optional native speed-ups of ws; without them ws works in plain JS.
  external: ['bufferutil', 'utf-8-validate'],
  logLevel: 'warning',
  legalComments: 'none',
};

// Every chunk gets this: `require` for the CommonJS dependencies' own
// require() calls, and the module directories of src/ (relative to the chunk).
const esmBanner = (outdir) => `import { createRequire as __podvolCreateRequire } from 'node:module';
import { join as __podvolJoin } from 'node:path';
import { pathToFileURL as __podvolPathToFileURL } from 'node:url';
const require = __podvolCreateRequire(import.meta.url);
const __podvolModuleDir = (rel) => __podvolJoin(import.meta.dirname, ${JSON.stringify(relative(outdir, join(repo, 'src')))}, rel);
const __podvolModuleUrl = (rel) => __podvolPathToFileURL(__podvolJoin(__podvolModuleDir(rel), 'module.js')).href;`;

/** Builds the bundle (entry: cli.mjs, exporting the CLI's main) into `outdir`, which it empties first. */
export async function buildBundle(outdir = bundleDir) {
  const startedAt = Date.now();
  const { build } = await import('esbuild');
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  await build({
    ...commonOptions,
    entryPoints: { cli: join(repo, 'src', 'cli.ts') },
    outdir,
    format: 'esm',
    splitting: true,
    target: 'node22',
    outExtension: { '.js': '.mjs' },
    banner: { js: esmBanner(outdir) },
  });
  // Written last: a build that failed half-way leaves no stamp, so no bundle runs.
  writeFileSync(join(outdir, 'stamp.json'), `${JSON.stringify({ startedAt })}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const optional = process.argv.includes('--if-possible');
  try {
    await buildBundle();
  } catch (err) {
    rmSync(bundleDir, { recursive: true, force: true });
    if (!optional) throw err;
    // The install hook: without esbuild (npm ci --omit=dev) podvol runs its sources.
    console.error(`podvol: no bundle built, the sources will run (${err.message.split('\n')[0]})`);
  }
}
