// Standalone mode never loads @kubernetes/client-node: loading it costs a bare
// Node process about 80 MiB and seconds of start-up (bench/startup.bench.ts,
// bench/memory.bench.ts). Everything `podvol run` imports before it knows it
// is in cluster mode must use the client's types only. Likewise gRPC and
// protobuf: loaded when a CSI driver registers or a CSI call is made, never
// at start (src/plugins/csi/grpc-status.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const repoRoot = join(import.meta.dirname, '..', '..');

test('importing the CLI and the daemon resolves no @kubernetes/client-node, gRPC or protobuf module', () => {
  const hook = `
    import { registerHooks } from 'node:module';
    registerHooks({ resolve(spec, ctx, next) {
      const heavy = ['@kubernetes/client-node', '@grpc/proto-loader', 'protobufjs'].some((p) => spec.startsWith(p));
      if (heavy || spec === '@grpc/grpc-js')
        console.log('LOADED ' + spec + ' from ' + ctx.parentURL);
      return next(spec, ctx);
    } });`;
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      `data:text/javascript,${encodeURIComponent(hook)}`,
      '--input-type=module',
      '-e',
      `await import(${JSON.stringify(join(repoRoot, 'src', 'cli.ts'))});
       await import(${JSON.stringify(join(repoRoot, 'src', 'agent', 'daemon.ts'))});
       console.log('imported');`,
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /imported/);
  assert.doesNotMatch(r.stdout, /LOADED/, 'a module imports a value from @kubernetes/client-node or gRPC');
});
