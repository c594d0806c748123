// Tests that really mount run only inside the private mount namespace that
// scripts/test.ts sets up (PODVOL_MOUNTNS=1), so nothing leaks into the host's
// mount table. Outside it they skip with a reason; under CI=true that is a failure.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, type TestContext, test } from 'node:test';
import { execa } from 'execa';
import { readMountInfo } from '../../src/mount/mountinfo.ts';
import { mountPointsAtOrBelow } from './mounts.ts';

export const inMountNamespace = process.env.PODVOL_MOUNTNS === '1';

function skipReason(): string | undefined {
  if (inMountNamespace) return undefined;
  if (process.getuid?.() !== 0) return 'needs root to mount (run npm test as root)';
  return 'not inside a private mount namespace (run through npm test)';
}

/** A test that mounts for real. */
export function mountTest(name: string, fn: (t: TestContext) => Promise<void>): void {
  const reason = skipReason();
  if (reason && process.env.CI === 'true') {
    test(name, () => {
      throw new Error(`mount test cannot be skipped under CI=true: ${reason}`);
    });
    return;
  }
  test(name, { skip: reason ?? false }, fn);
}

/**
 * A fresh directory, removed after the test with everything in it: whatever a
 * test (or the podvol it ran) left mounted below it is detached first, so that
 * a failing test leaves nothing behind either. (Only inside the test mount
 * namespace; rm never runs across a mount point.)
 */
export async function tempDir(t: TestContext, prefix = 'podvol-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => removeTempDir(dir));
  created.add(dir);
  return dir;
}

// A test's after hooks run in the order they were registered, so a daemon the test
// stops in a later hook may still write below its temp dir (and recreate it) after the
// removal above. Once every test of the file has ended, nothing runs any more: remove
// again whatever came back.
const created = new Set<string>();
after(async () => {
  for (const dir of created) await removeTempDir(dir);
});

export async function removeTempDir(dir: string): Promise<void> {
  if (inMountNamespace) {
    // Read until two reads agree: other test files mount and unmount meanwhile.
    for (const mp of mountPointsAtOrBelow(dir, await readMountInfo())) {
      // -l: a mount a test left busy still goes; the namespace ends with the run anyway.
      await execa('umount', ['-l', mp], { reject: false, timeout: 10_000 });
    }
  }
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
}
