// Plugins touch the filesystem only through the one the host hands them
// (VolumeHost.getFs), so `podvol plan` can run their real SetUp and TearDown
// against a recording filesystem. This pins that down for every plugin file.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';

// Left on node:fs, for a reason: disk usage only reads, for /metrics, never
// during SetUp. The CSI plugin (csi/) goes through the host's fs ops too.
const exempt = (f: string) => f === 'util/disk-usage.ts';

test('no plugin file imports node:fs, except disk usage', async () => {
  const root = 'src/plugins';
  const files = (await readdir(root, { recursive: true })).filter((f) => f.endsWith('.ts'));
  assert.ok(files.includes('emptydir.ts') && files.includes('util/atomic-writer.ts'));
  assert.ok(files.includes('csi/vol-data.ts') && files.includes('csi/volume-index.ts'));
  const offenders: string[] = [];
  for (const f of files) {
    if (exempt(f)) continue;
    const text = await readFile(join(root, f), 'utf8');
    if (/from 'node:fs(\/promises)?'/.test(text)) offenders.push(f);
  }
  assert.deepEqual(offenders, []);
});
