// The actual state is changed only through its Mark* calls: what a reader gets
// cannot be changed, stays as it was handed out, and every change reaches the
// listeners (the runtime API's waits are woken by them instead of polling).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActualStateOfWorld, type MarkVolumeOpts } from '../../../src/agent/volumemanager/actual-state.ts';

const volume = (podUID: string, volumeName: string): MarkVolumeOpts => ({
  key: `${podUID}/${volumeName}`,
  podUID,
  podNamespace: 'default',
  podName: podUID,
  volumeName,
  innerName: volumeName,
  pluginName: 'kubernetes.io/configmap',
  spec: { volume: { name: volumeName, configMap: { name: 'cm' } }, readOnly: false },
  path: `/pods/${podUID}/volumes/${volumeName}`,
  specExact: true,
  reconstructed: false,
});

function state() {
  let changes = 0;
  const asw = new ActualStateOfWorld(() => changes++);
  return { asw, changes: () => changes };
}

test('a volume read from the actual state cannot be changed, and keeps what it said when the state changes', () => {
  const { asw } = state();
  asw.markVolumeAsMounted(volume('a', 'cm'));
  const read = asw.get('a/cm');
  assert.ok(read);
  // @ts-expect-error: the entries are read-only; the Mark* calls are the writers.
  assert.throws(() => (read.remountRequired = true), TypeError);
  const [first] = asw.all();
  assert.ok(first);
  assert.throws(() => Object.assign(first, { state: 'uncertain' }), TypeError);
  asw.markRemountRequired(() => true);
  assert.equal(read.remountRequired, false, 'the snapshot handed out is not changed');
  assert.equal(asw.get('a/cm')?.remountRequired, true);
  assert.equal(asw.forPod('a')[0]?.remountRequired, true);
});

test('each Mark* call that changes the state notifies the listeners once', () => {
  const { asw, changes } = state();
  const calls: [string, () => void][] = [
    ['markVolumeMountAsUncertain', () => asw.markVolumeMountAsUncertain(volume('a', 'cm'))],
    ['markVolumeAsMounted', () => asw.markVolumeAsMounted(volume('a', 'cm'))],
    ['markRemountRequired (the node)', () => asw.markRemountRequired(() => true)],
    ['clearRemountRequired', () => asw.clearRemountRequired('a/cm')],
    ['markRemountRequired (one pod)', () => asw.markRemountRequired(() => true, 'a')],
    ['markFSResizeRequired', () => asw.markFSResizeRequired('a/cm', '7')],
    ['markVolumeAsResized', () => asw.markVolumeAsResized('a/cm')],
    [
      'syncReconstructedVolume',
      () => asw.syncReconstructedVolume('a/cm', { key: 'a/config', volumeName: 'config' }),
    ],
    ['markVolumeAsUnmounted', () => asw.markVolumeAsUnmounted('a/config')],
  ];
  for (const [name, call] of calls) {
    const before = changes();
    call();
    assert.equal(changes() - before, 1, name);
  }
  assert.equal(asw.all().length, 0);
});

test('a SetUp that ends keeps the remount mark set while it ran and a resize the claim asked for', () => {
  const { asw } = state();
  asw.markVolumeAsMounted(volume('a', 'cm'));
  asw.markRemountRequired(() => true);
  // The refresh begins, the configMap changes again, the claim asks for room.
  asw.clearRemountRequired('a/cm');
  asw.markRemountRequired(() => true, 'a');
  asw.markFSResizeRequired('a/cm', '7');
  asw.markVolumeAsMounted(volume('a', 'cm'));
  const v = asw.get('a/cm');
  assert.equal(v?.state, 'mounted');
  assert.equal(v?.remountRequired, true, 'refreshed again');
  assert.equal(v?.resizeRequired, true, 'still to be grown');
  assert.equal(v?.resizeSeen, '7');
});

test('a reconstructed volume takes the desired name in one change: no listener sees its pod without it', () => {
  const seen: string[][] = [];
  const asw: ActualStateOfWorld = new ActualStateOfWorld(() => seen.push(asw.forPod('a').map((v) => v.key)));
  asw.markVolumeMountAsUncertain({ ...volume('a', 'pv-1'), reconstructed: true, specExact: false });
  asw.syncReconstructedVolume('a/pv-1', { key: 'a/data', volumeName: 'data' });
  assert.deepEqual(seen, [['a/pv-1'], ['a/data']]);
  assert.equal(asw.get('a/data')?.state, 'uncertain', 'still to be confirmed by its SetUp');
});

test('size counts the volumes, mounted or uncertain, as all() lists them', () => {
  const { asw } = state();
  assert.equal(asw.size, 0);
  asw.markVolumeAsMounted(volume('a', 'cm'));
  asw.markVolumeMountAsUncertain(volume('a', 'other'));
  asw.markVolumeAsMounted(volume('a', 'cm'));
  assert.equal(asw.size, 2);
  assert.equal(asw.size, asw.all().length);
  asw.markVolumeAsUnmounted('a/cm');
  assert.equal(asw.size, 1);
});
