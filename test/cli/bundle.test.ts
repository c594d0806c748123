// The bundle bin/podvol.js runs while it is fresh (scripts/build-bundle.mjs)
// behaves as the sources do, and reads the files its modules read next to
// themselves (the CSI protos) from src/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { buildBundle } from '../../scripts/build-bundle.mjs';
import { podWith } from '../helpers/pods.ts';

const repoRoot = join(import.meta.dirname, '..', '..');
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'podvol-bundle-'));
  await buildBundle(dir);
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI's main from `entry` with `args`, in a fresh Node. */
function cli(entry: string, args: string[]) {
  const code = `const { main } = await import(${JSON.stringify(pathToFileURL(entry).href)});
    process.exitCode = await main(['node', 'podvol', ...${JSON.stringify(args)}]);`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 120_000,
    cwd: repoRoot,
  });
}

// Nothing in this pod's plan depends on the machine's state at the moment (the
// examples' tmpfs sizes follow node allocatable, which follows free disk space
// while other tests write to it).
const manifest = {
  apiVersion: 'v1',
  kind: 'Pod',
  ...podWith(
    [
      { name: 'scratch', emptyDir: {} },
      { name: 'mem', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
      {
        name: 'info',
        downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
      },
    ],
    {},
    { name: 'bundled', namespace: 'default', uid: '0f6b8c1e-bundle-test' },
  ),
};

test('the bundle plans a pod exactly as the sources do', () => {
  const manifests = join(dir, 'manifests');
  mkdirSync(manifests, { recursive: true });
  writeFileSync(join(manifests, 'pod.json'), JSON.stringify(manifest));
  const args = ['plan', '-f', manifests, '--root-dir', join(dir, 'root'), '-o', 'json'];
  const fromSources = cli(join(repoRoot, 'src', 'cli.ts'), args);
  const fromBundle = cli(join(dir, 'cli.mjs'), args);
  assert.equal(fromSources.status, 0, fromSources.stderr);
  assert.equal(fromBundle.status, 0, fromBundle.stderr);
  assert.ok(JSON.parse(fromBundle.stdout), 'plan printed JSON');
  assert.equal(fromBundle.stdout, fromSources.stdout);
});

test('the bundle loads the CSI proto from src/ when a CSI call needs it', () => {
  // grpc.ts is a chunk of its own (imported on demand); its loadCSIProto reads
  // src/plugins/csi/vendor/csi.proto through the bundle's module directory.
  const code = `
    const { readdirSync } = await import('node:fs');
    const chunks = readdirSync(${JSON.stringify(dir)}).filter((f) => f.endsWith('.mjs'));
    let loaded = false;
    for (const c of chunks) {
      const m = await import(${JSON.stringify(`${pathToFileURL(dir).href}/`)} + c);
      for (const v of Object.values(m)) {
        if (typeof v === 'function' && v.name === 'loadCSIProto') {
          const proto = v();
          loaded = typeof proto.Node === 'function' && typeof proto.Identity === 'function';
        }
      }
    }
    console.log(loaded ? 'proto loaded' : 'no loadCSIProto in any chunk');`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /proto loaded/);
});
