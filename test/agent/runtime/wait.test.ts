// WaitForAttachAndMount / WaitForUnmount over the runtime API: the wait is
// woken by the volume manager's change events (no polling: with the clock
// frozen, nothing but an event can end it early), and a volume that failed for
// a reason retrying cannot cure ends it at once with 422 and the reasons.
import assert from 'node:assert/strict';
import { mock, type TestContext, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { type Answer, listPods, permanentlyFailed, waitVolumes } from '../../../src/agent/runtime/api.ts';
import { RuntimeApiError } from '../../../src/agent/runtime/errors.ts';
import { runtimeStateOf } from '../../../src/agent/runtime/state.ts';
import { TerminationGate } from '../../../src/agent/runtime/termination.ts';
import type { RuntimeState } from '../../../src/agent/runtime/types.ts';
import type { PodStatus, VolumeStatus } from '../../../src/agent/volumemanager/status.ts';
import { isPermanentVolumeReason, permanentVolumeReasons, volumeReasons } from '../../../src/reasons.ts';
import { podWith } from '../../helpers/pods.ts';
import { harness } from '../volumemanager/harness.ts';

/** A RuntimeState whose pod the test changes by hand, emitting change events as the volume manager does. */
function fakeState() {
  const listeners = new Set<() => void>();
  let volumes: VolumeStatus[] = [];
  let known = true;
  const vol = (
    name: string,
    state: VolumeStatus['state'],
    reason: VolumeStatus['reason'] = '',
  ): VolumeStatus => ({
    name,
    plugin: 'kubernetes.io/empty-dir',
    state,
    path: '',
    reason,
    message: reason ? `${reason} happened` : '',
    attempts: 1,
  });
  const status = (): PodStatus => ({ namespace: 'default', name: 'web', uid: 'u1', volumes });
  const state = {
    desiredPod: () => (known ? { pod: {} as V1Pod, volumes: new Map() } : undefined),
    podStatus: () => (known || volumes.length > 0 ? status() : undefined),
    pods: () => (known || volumes.length > 0 ? [status()] : []),
    hasMountedVolumes: () => volumes.length > 0,
    onChange(fn: () => void) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
  } as unknown as RuntimeState;
  return {
    state,
    listeners,
    vol,
    set(v: VolumeStatus[], isKnown = true) {
      volumes = v;
      known = isKnown;
      for (const fn of listeners) fn();
    },
  };
}

const opts = (state: RuntimeState) => ({
  state,
  host: {} as never,
  subPaths: { prepare: () => Promise.reject(new Error('unused')) },
});

/** The answer, or the RuntimeApiError as an answer (what the server sends). */
const settle = (p: Promise<Answer>): Promise<Answer> =>
  p.catch((err) => {
    if (!(err instanceof RuntimeApiError)) throw err;
    return { status: err.status, body: { reason: err.reason, message: err.message, ...err.extra } };
  });

/** Freezes setTimeout: a wait that ends without a tick was ended by an event. */
function freezeTimers(t: TestContext) {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
}

test('a wait for mounted ends on the change event that makes the pod ready, not on a timer', async (t) => {
  freezeTimers(t);
  const f = fakeState();
  f.set([f.vol('data', 'pending'), f.vol('info', 'mounted')]);
  let answer: Answer | undefined;
  const waiting = settle(waitVolumes(opts(f.state), 'u1', 300, 'mounted')).then((a) => {
    answer = a;
    return a;
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(answer, undefined, 'still waiting');
  assert.equal(f.listeners.size, 1, 'subscribed to change events');
  // A retryable failure does not end it.
  f.set([f.vol('data', 'failed', 'HostPathNotFound'), f.vol('info', 'mounted')]);
  await new Promise((r) => setImmediate(r));
  assert.equal(answer, undefined, 'a retryable reason keeps the wait going');
  f.set([f.vol('data', 'mounted'), f.vol('info', 'mounted')]);
  const a = await waiting;
  assert.equal(a.status, 200);
  assert.equal((a.body as { ready: boolean }).ready, true);
  assert.equal(f.listeners.size, 0, 'unsubscribed once answered');
});

test('a permanent failure ends a wait for mounted at once: 422 VolumesFailedPermanently with the reasons', async (t) => {
  freezeTimers(t);
  const f = fakeState();
  f.set([f.vol('data', 'pending'), f.vol('cache', 'mounted')]);
  const waiting = settle(waitVolumes(opts(f.state), 'u1', 300, 'mounted'));
  await new Promise((r) => setImmediate(r));
  f.set([f.vol('data', 'failed', 'UnknownStorageMedium'), f.vol('cache', 'mounted')]);
  const a = await waiting;
  assert.equal(a.status, 422);
  const body = a.body as { reason: string; message: string; ready: boolean; volumes: VolumeStatus[] };
  assert.equal(body.reason, 'VolumesFailedPermanently');
  assert.equal(body.ready, false);
  assert.equal(
    body.message,
    'volumes of pod default/web cannot be set up until the pod changes: data (UnknownStorageMedium: UnknownStorageMedium happened)',
  );
  assert.deepEqual(
    body.volumes.map((v) => [v.name, v.state, v.reason]),
    [
      ['data', 'failed', 'UnknownStorageMedium'],
      ['cache', 'mounted', ''],
    ],
  );
  // Already failed when asked, even with wait=0.
  assert.equal((await settle(waitVolumes(opts(f.state), 'u1', 0, 'mounted'))).status, 422);
});

test('a wait times out with 504 and the reasons; an unknown pod is 404 for mounted, done for unmounted', async () => {
  const f = fakeState();
  f.set([f.vol('data', 'failed', 'ConfigMapNotFound')]);
  const a = await settle(waitVolumes(opts(f.state), 'u1', 0.05, 'mounted'));
  assert.equal(a.status, 504);
  assert.deepEqual(
    (a.body as { volumes: VolumeStatus[] }).volumes.map((v) => v.reason),
    ['ConfigMapNotFound'],
  );
  f.set([], false);
  assert.equal((await settle(waitVolumes(opts(f.state), 'u1', 0, 'mounted'))).status, 404);
  assert.equal((await settle(waitVolumes(opts(f.state), 'u1', 0, 'unmounted'))).status, 200);
});

test('a wait for unmounted ends on the event that removes the last volume', async (t) => {
  freezeTimers(t);
  const f = fakeState();
  f.set([f.vol('data', 'unmounting')], false);
  const waiting = settle(waitVolumes(opts(f.state), 'u1', 300, 'unmounted'));
  await new Promise((r) => setImmediate(r));
  f.set([], false);
  assert.equal((await waiting).status, 200);
});

test('a client that goes away ends the wait and its subscription', async (t) => {
  freezeTimers(t);
  const f = fakeState();
  f.set([f.vol('data', 'pending')]);
  const gone = new AbortController();
  const waiting = settle(waitVolumes(opts(f.state), 'u1', 300, 'mounted', gone.signal));
  await new Promise((r) => setImmediate(r));
  gone.abort();
  assert.equal((await waiting).status, 504);
  assert.equal(f.listeners.size, 0);
});

test('permanent reasons are catalogue reasons; claims, objects, drivers and paths that may appear are not', () => {
  for (const r of permanentVolumeReasons) assert.ok(Object.hasOwn(volumeReasons, r), r);
  for (const r of [
    'HostPathNotFound',
    'ConfigMapNotFound',
    'SecretNotFound',
    'ClaimPending',
    'DriverNotRegistered',
    'AttachPending',
    'CSICallFailed',
    'MountFailed',
    'Forbidden',
    // In cluster mode also an API the server does not serve yet.
    'StandaloneMode',
  ])
    assert.equal(isPermanentVolumeReason(r), false, r);
  assert.equal(isPermanentVolumeReason('InvalidPath'), true);
  assert.equal(isPermanentVolumeReason('NoSuchReason'), false);
  assert.deepEqual(
    permanentlyFailed({
      namespace: 'n',
      name: 'p',
      uid: 'u',
      volumes: [
        {
          name: 'a',
          plugin: '',
          state: 'mounted',
          path: '',
          reason: 'SpecChangeRequiresRestart',
          message: '',
          attempts: 0,
        },
        {
          name: 'b',
          plugin: '',
          state: 'failed',
          path: '',
          reason: 'InvalidMode',
          message: 'm',
          attempts: 0,
        },
      ],
    }).map((v) => v.name),
    ['b'],
  );
});

test('with the real volume manager: the mount that completes the pod answers the wait; a bad medium fails it at once', async (t) => {
  const pod = (uid: string, medium?: string) =>
    podWith(
      [{ name: 'data', emptyDir: medium ? { medium } : {} }],
      {},
      { name: uid, namespace: 'default', uid },
    );
  const { root, vm, pluginMgr, setReady } = await harness(t, [pod('good'), pod('bad', 'Sideways')]);
  setReady(true);
  const gate = new TerminationGate({ rootDir: root, logger: pino({ level: 'silent' }) });
  await gate.load();
  const o = opts(runtimeStateOf(vm, pluginMgr, gate));
  // Asked before podvol has even read the pods: both wait.
  const good = settle(waitVolumes(o, 'good', 300, 'mounted'));
  const bad = settle(waitVolumes(o, 'bad', 300, 'mounted'));
  // The reconciler, stepped by hand: no timer of the wait is needed to answer.
  for (let i = 0; i < 5; i++) {
    await vm.reconcileOnce();
    await vm.executor.drain();
  }
  const g = await good;
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const b = await bad;
  assert.equal(b.status, 422, JSON.stringify(b.body));
  assert.match(
    (b.body as { message: string }).message,
    /data \(UnknownStorageMedium: unknown storage medium "Sideways"\)/,
  );
});

test('GET /v1/pods?namespace=&name=&wait= answers on the event that makes the pod known (how podvol wait resolves namespace/name)', async (t) => {
  freezeTimers(t);
  const f = fakeState();
  f.set([], false);
  const q = new URLSearchParams({ namespace: 'default', name: 'web', wait: '300' });
  let answered = false;
  const waiting = listPods(opts(f.state), q).then((a) => {
    answered = true;
    return a;
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(answered, false);
  f.set([f.vol('data', 'pending')]);
  const a = await waiting;
  assert.deepEqual((a.body as { pods: unknown[] }).pods, [
    { uid: 'u1', namespace: 'default', name: 'web', ready: false },
  ]);
  // Another name is not it; without wait the list answers at once, as before.
  mock.timers.reset();
  const other = await listPods(
    opts(f.state),
    new URLSearchParams({ namespace: 'default', name: 'db', wait: '0.05' }),
  );
  assert.deepEqual((other.body as { pods: unknown[] }).pods, []);
  assert.equal(((await listPods(opts(f.state))).body as { pods: unknown[] }).pods.length, 1);
});
