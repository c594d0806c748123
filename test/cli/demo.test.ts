// npm run demo, as an operator runs it: the scripted tour (--once) and the
// interactive demo stopped with Ctrl-C both end with nothing mounted and
// nothing left in the temp directory. The demo runs in this test's mount
// namespace (PODVOL_MOUNTNS=1 is inherited), so its mounts are visible here.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { repoRoot, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';

const demo = join(repoRoot, 'scripts', 'demo.ts');

mountTest(
  'demo --once: pod mounted, configMap edit on disk, pod deleted and unmounted, nothing left',
  async (t) => {
    const tmp = await tempDir(t, 'podvol-demo-test-');
    const r = await execa(process.execPath, [demo, '--once'], {
      env: { TMPDIR: tmp },
      reject: false,
      all: true,
      timeout: 300_000,
    });
    assert.equal(r.exitCode, 0, r.all);
    assert.match(r.stdout, /demo\s+config\s+kubernetes\.io\/configmap\s+mounted/);
    assert.match(r.stdout, /demo\s+token\s+kubernetes\.io\/projected\s+mounted/);
    assert.match(r.stdout, /configmap\/config\/greeting now reads: hello again/);
    assert.match(r.stdout, /the pod's volumes are unmounted and its directory is gone/);
    assert.match(r.stdout, /done: nothing left mounted/);
    assert.deepEqual(await mountsBelow(tmp), []);
    assert.deepEqual(await readdir(tmp), []);
  },
);

mountTest(
  'demo stopped by SIGINT with its pod mounted: podvol stopped, volumes drained, temp dir gone',
  async (t) => {
    const tmp = await tempDir(t, 'podvol-demo-test-');
    const child = execa(process.execPath, [demo], {
      env: { TMPDIR: tmp },
      reject: false,
      all: true,
      timeout: 300_000,
    });
    let out = '';
    child.all?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    await waitFor('the demo to say what to try', () => out.includes('Ctrl-C stops podvol'), 180_000);
    assert.ok((await mountsBelow(tmp)).length >= 2, 'the secret and token tmpfs are mounted');
    child.kill('SIGINT');
    const r = await child;
    assert.equal(r.exitCode, 0, r.all);
    assert.match(r.stdout, /SIGINT: stopping podvol/);
    assert.deepEqual(await mountsBelow(tmp), []);
    assert.deepEqual(await readdir(tmp), []);
  },
);
