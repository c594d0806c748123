import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { claimRootDir, RootDirError } from '../../src/agent/root-dir.ts';
import { podOwned } from '../../src/agent/volumemanager/records.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { createSafeFs } from '../../src/volumehost/safe-fs.ts';
import { tempDir } from '../helpers/mountns.ts';

const log = pino({ level: 'silent' });
const fs = createSafeFs(nodeFsOps());
const mark = async (root: string) => JSON.parse(await readFile(join(root, 'podvol/root-dir.json'), 'utf8'));

test('a fresh root directory is marked with the node name; the same name starts again', async (t) => {
  const root = join(await tempDir(t), 'root');
  await claimRootDir(root, 'node1.example.internal', false, log, fs);
  assert.equal((await mark(root)).nodeName, 'node1.example.internal');
  await claimRootDir(root, 'node1.example.internal', false, log, fs);
});

test('a root directory marked for another node name is refused unless adopted', async (t) => {
  const root = await tempDir(t);
  await claimRootDir(root, 'node1.example.internal', false, log, fs);
  await mkdir(join(root, 'pods/u1/volumes'), { recursive: true });
  await assert.rejects(claimRootDir(root, 'node1', false, log, fs), (err: Error) => {
    assert.ok(err instanceof RootDirError);
    assert.match(
      err.message,
      /serves node "node1\.example\.internal".*--node-name "node1".*--adopt-root-dir/,
    );
    return true;
  });
  assert.equal((await mark(root)).nodeName, 'node1.example.internal', 'the mark is unchanged');
  await claimRootDir(root, 'node1', true, log, fs);
  assert.equal((await mark(root)).nodeName, 'node1');
  assert.equal(await podOwned(fs, root, 'u1'), true, 'adoption makes the pod directories podvol');
});

test('a non-empty root directory without a mark (another agent) is refused unless adopted', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'pods/kubelet-pod/volumes/kubernetes.io~empty-dir/db'), { recursive: true });
  await writeFile(join(root, 'pods/kubelet-pod/volumes/kubernetes.io~empty-dir/db/data'), 'x');
  await assert.rejects(
    claimRootDir(root, 'n', false, log, fs),
    /holds pod directories .* no podvol mark.*--adopt-root-dir/,
  );
  assert.equal(await podOwned(fs, root, 'kubelet-pod'), false);
  await claimRootDir(root, 'n', true, log, fs);
  assert.equal(await podOwned(fs, root, 'kubelet-pod'), true);
  assert.equal(
    await readFile(join(root, 'pods/kubelet-pod/volumes/kubernetes.io~empty-dir/db/data'), 'utf8'),
    'x',
  );
});

test('a root directory an earlier podvol left (podvol/ without a mark) is just marked', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'podvol/pods/u1'), { recursive: true });
  await mkdir(join(root, 'pods/u1'), { recursive: true });
  await claimRootDir(root, 'n', false, log, fs);
  assert.equal((await mark(root)).nodeName, 'n');
});

test('a root directory without pod directories (a CSI plugin made plugins_registry first) is marked, not refused', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'plugins_registry'), { recursive: true });
  await mkdir(join(root, 'plugins/example.csi'), { recursive: true });
  await claimRootDir(root, 'n', false, log, fs);
  assert.equal((await mark(root)).nodeName, 'n');
});
