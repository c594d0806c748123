// The P1 floor is a fixed yardstick only if it reaches podvol's end state:
// sameEndState() is what says so in every bench run, so it must name a
// difference of any kind (an entry missing, a mode, a link target).
import assert from 'node:assert/strict';
import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { floorSteps, podTree, sameEndState } from '../../bench/baseline.ts';
import { tempDir } from '../helpers/mountns.ts';

async function pod(dir: string, opts: { mode?: number; link?: string; extra?: boolean } = {}) {
  const data = join(dir, 'volumes', 'kubernetes.io~downward-api', 'podinfo', '..2026_11_30_10_00_00.1');
  await mkdir(data, { recursive: true });
  await writeFile(join(data, 'name'), 'p');
  await chmod(join(data, 'name'), opts.mode ?? 0o644);
  await symlink(
    '..2026_11_30_10_00_00.1',
    join(dir, 'volumes', 'kubernetes.io~downward-api', 'podinfo', '..data'),
  );
  await symlink(
    opts.link ?? '..data/name',
    join(dir, 'volumes', 'kubernetes.io~downward-api', 'podinfo', 'name'),
  );
  if (opts.extra) await writeFile(join(dir, 'volumes', 'extra'), '');
}

test('the same tree under another atomic-writer timestamp is the same end state', async (t) => {
  const base = await tempDir(t);
  await pod(join(base, 'a'));
  await pod(join(base, 'b'));
  sameEndState(join(base, 'a'), join(base, 'b'));
  assert.ok(podTree(join(base, 'a')).some((l) => l.endsWith('link ..2026_01_01_00_00_00.000000000')));
});

test('a missing entry, another mode or another link target is named as a difference', async (t) => {
  const base = await tempDir(t);
  await pod(join(base, 'floor'));
  for (const [name, opts] of [
    ['extra', { extra: true }],
    ['mode', { mode: 0o600 }],
    ['link', { link: '..data/other' }],
  ] as const) {
    await pod(join(base, name), opts);
    assert.throws(
      () => sameEndState(join(base, 'floor'), join(base, name)),
      /does not reach podvol's end state/,
    );
  }
});

test('the floor is fixed work: three mounts and one removal per pod, whatever podvol does', () => {
  const steps = floorSteps('/r', ['u0', 'u1']);
  assert.equal(steps.filter((s) => s.action === 'mount').length, 6);
  assert.equal(steps.filter((s) => s.action === 'umount').length, 6);
  assert.deepEqual(
    steps.filter((s) => s.action === 'rm').map((s) => s.path),
    ['/r/pods/u0', '/r/pods/u1'],
  );
});
