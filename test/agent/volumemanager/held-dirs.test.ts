// An operation's held directories (SafeFs.withHeldDirs) reach what it calls
// as an argument: the records, the plugin's SetUp (MounterArgs.fs), the
// subPath clean-up and the TearDown (UnmounterArgs.fs) walk through the
// operation's SafeFs, so the pod's directory is opened once per operation.
// Were the plugin handed the host's SafeFs instead, its walks would open the
// pod's directory again from the root.
import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { test } from 'node:test';
import { type FsOps, nodeFsOps } from '../../../src/volumehost/fs.ts';
import { harness, pod } from './harness.ts';

/** Walk-only host fs (component by component, so each directory open names it) counting opens by name. */
function openCounting() {
  const ops = nodeFsOps({ openat2: false });
  const opens = new Map<string, number>();
  const fs: FsOps = {
    ...ops,
    open: (path, flags, mode) => {
      opens.set(basename(path), (opens.get(basename(path)) ?? 0) + 1);
      return ops.open(path, flags, mode);
    },
  };
  return { fs, opens };
}

test("one mount and one unmount operation each open the pod's directory once, its plugin's walks included", async (t) => {
  const { fs, opens } = openCounting();
  const uid = 'held-1';
  const h = await harness(t, [pod(uid, [{ name: 'data', emptyDir: {} }])], { fs });
  h.setReady(true);
  opens.clear();
  await h.settle();
  assert.ok(h.vm.asw.forPod(uid).length === 1, 'the volume is mounted');
  assert.ok((opens.get('data') ?? 0) >= 1, 'the emptyDir SetUp walked to its volume');
  // <root>/pods/<uid> and the records' <root>/podvol/pods/<uid>, once each.
  assert.equal(opens.get(uid), 2, "the pod's directories: opened by the first steps, reused by the SetUp");
  opens.clear();
  h.setPods([]);
  await h.settle();
  assert.equal(h.vm.asw.forPod(uid).length, 0, 'the volume is unmounted');
  // Once each by the unmount operation (subPath clean-up, TearDown, record), once each by the
  // orphan clean-up that removes both directories afterwards (through the host's SafeFs).
  assert.equal(opens.get(uid), 4, "the pod's directories: opened once by the unmount, once by the clean-up");
});
