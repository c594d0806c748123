// The runtime socket end to end: a real podvol, real mounts, the socket's
// modes and peer-credential check, the wait and mounts endpoints, subPath
// bind mounts, the terminated handshake and the CLI that talks to it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, lstat, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { callRuntime } from '../../../src/agent/runtime/client.ts';
import { runtimeSocketOf, startPodvol, waitFor as waitForShort } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { runCli } from '../ops/cli.ts';

/** The helper's waits, with a default fit for a machine busy with other test runs. */
const waitFor = <T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 120_000,
) => waitForShort(what, fn, ms);

const manifest = (name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', ...metadata },
    spec,
  });

const webSpec = {
  containers: [
    {
      name: 'app',
      image: 'busybox',
      env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      volumeMounts: [
        { name: 'data', mountPath: '/data' },
        { name: 'info', mountPath: '/info' },
        { name: 'data', mountPath: '/logs', subPathExpr: 'logs/$(POD)' },
        { name: 'info', mountPath: '/etc/podname', subPath: 'name' },
      ],
    },
    {
      name: 'bad',
      image: 'busybox',
      volumeMounts: [{ name: 'data', mountPath: '/d', mountPropagation: 'Bidirectional' }],
    },
    // The API server refuses `..` in subPath; only an expansion can produce it.
    {
      name: 'escape',
      image: 'busybox',
      env: [
        { name: 'UP', value: '..' },
        { name: 'ABS', value: '/etc' },
      ],
      volumeMounts: [{ name: 'data', mountPath: '/d', subPathExpr: 'a/$(UP)/$(UP)' }],
    },
    {
      name: 'absolute',
      image: 'busybox',
      env: [{ name: 'ABS', value: '/etc' }],
      volumeMounts: [{ name: 'data', mountPath: '/d', subPathExpr: '$(ABS)' }],
    },
  ],
  initContainers: [{ name: 'init', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/init' }] }],
  volumes: [
    { name: 'data', emptyDir: {} },
    { name: 'info', downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
  ],
};

async function setup(t: import('node:test').TestContext) {
  const dir = await tempDir(t);
  const manifests = join(dir, 'manifests');
  await mkdir(manifests);
  const root = join(dir, 'root');
  return { dir, manifests, root, socket: runtimeSocketOf(root) };
}

// Generous: the server's own waits (wait=120) end first, however busy the machine is.
const get = (socket: string, path: string) => callRuntime(socket, 'GET', path, 300_000);

async function uidOf(socket: string, name: string): Promise<string> {
  return waitFor(
    `pod ${name} known`,
    async () => {
      const pods = (await get(socket, '/v1/pods')).body.pods as { uid: string; name: string }[];
      return pods.find((p) => p.name === name)?.uid;
    },
    120_000,
  );
}

mountTest('runtime socket: modes, wait, mounts with subPath, errors, terminated handshake', async (t) => {
  const { manifests, root, socket } = await setup(t);
  await writeFile(join(manifests, 'web.json'), manifest('web', webSpec));
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());

  const sock = await stat(socket);
  assert.ok(sock.isSocket());
  assert.equal(sock.mode & 0o777, 0o600);
  assert.equal(sock.uid, 0);
  assert.equal((await stat(dirname(socket))).mode & 0o777, 0o700);

  const uid = await uidOf(socket, 'web-testnode');
  const waited = await get(socket, `/v1/pods/${uid}/volumes?wait=120`);
  assert.equal(waited.status, 200);
  assert.equal(waited.body.ready, true);
  assert.equal(waited.body.namespace, 'default');
  assert.deepEqual(
    (waited.body.volumes as { name: string; state: string }[]).map((v) => [v.name, v.state]),
    [
      ['data', 'mounted'],
      ['info', 'mounted'],
    ],
  );

  const m = await get(socket, `/v1/pods/${uid}/containers/app/mounts`);
  assert.equal(m.status, 200, JSON.stringify(m.body));
  const mounts = m.body.mounts as { destination: string; source: string; options: string[]; type: string }[];
  const podDir = join(root, 'pods', uid);
  assert.deepEqual(
    mounts.map((x) => [x.destination, x.type, x.source.slice(podDir.length + 1), x.options.join(',')]),
    [
      ['/data', 'bind', 'volumes/kubernetes.io~empty-dir/data', 'rbind,rw,rprivate'],
      ['/info', 'bind', 'volumes/kubernetes.io~downward-api/info', 'rbind,ro,rprivate'],
      ['/logs', 'bind', 'volume-subpaths/data/app/2', 'rbind,rw,rprivate'],
      ['/etc/podname', 'bind', 'volume-subpaths/info/app/3', 'rbind,ro,rprivate'],
    ],
  );
  assert.deepEqual(m.body.supplementalGroups, []);
  // The subPathExpr directory was created in the volume, and both subpaths are bind mounts of it.
  assert.ok(
    (await stat(join(podDir, 'volumes/kubernetes.io~empty-dir/data/logs/web-testnode'))).isDirectory(),
  );
  assert.equal(await readFile(join(podDir, 'volume-subpaths/info/app/3'), 'utf8'), 'web-testnode');
  const below = (await mountsBelow(podDir)).map((x) => x.mountPoint.slice(podDir.length + 1));
  assert.ok(
    below.includes('volume-subpaths/data/app/2') && below.includes('volume-subpaths/info/app/3'),
    below.join(),
  );
  // Asking again reuses the same bind mounts.
  assert.equal((await get(socket, `/v1/pods/${uid}/containers/app/mounts`)).status, 200);
  assert.equal((await mountsBelow(podDir)).length, below.length);

  const init = await get(socket, `/v1/pods/${uid}/containers/init/mounts`);
  assert.equal(init.status, 200);
  const refused = await get(socket, `/v1/pods/${uid}/containers/bad/mounts`);
  assert.equal(refused.status, 422);
  assert.match(
    String(refused.body.message),
    /Bidirectional mount propagation is available only to privileged containers/,
  );
  const upward = await get(socket, `/v1/pods/${uid}/containers/escape/mounts`);
  assert.equal(upward.status, 422);
  assert.equal(upward.body.message, "unable to provision SubPath `a/../..`: must not contain '..'");
  const absolute = await get(socket, `/v1/pods/${uid}/containers/absolute/mounts`);
  assert.equal(absolute.status, 422);
  assert.equal(absolute.body.message, 'error SubPath `/etc` must not be an absolute path');
  assert.equal((await get(socket, `/v1/pods/${uid}/containers/nope/mounts`)).status, 404);
  assert.equal((await get(socket, '/v1/pods/no-such-pod/containers/app/mounts')).status, 404);
  assert.equal((await get(socket, '/v1/pods/no-such-pod/volumes?wait=0.1')).status, 404);
  assert.equal((await get(socket, '/v1/pods/no-such-pod/volumes?for=unmounted')).status, 200);
  assert.equal((await get(socket, `/v1/pods/${uid}/volumes?wait=301`)).status, 400);
  assert.equal((await callRuntime(socket, 'GET', `/v1/pods/${uid}/terminated`, 10_000)).status, 405);

  // The CLI prints the same mounts, and waits by namespace/name.
  const cli = await runCli([
    'mounts',
    'default/web-testnode',
    '-c',
    'app',
    '-o',
    'json',
    '--runtime-socket',
    socket,
  ]);
  assert.equal(cli.code, 0, cli.stderr);
  assert.deepEqual(JSON.parse(cli.stdout).mounts, mounts);
  const table = await runCli(['mounts', uid, '-c', 'app', '--runtime-socket', socket]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^DESTINATION\s+SOURCE\s+OPTIONS\n\/data\s+\S+data\s+rbind,rw,rprivate\n/);
  assert.equal((await runCli(['wait', 'default/web-testnode', '--runtime-socket', socket])).code, 0);
  const noContainer = await runCli(['mounts', uid, '--runtime-socket', socket]);
  assert.equal(noContainer.code, 2);
  assert.equal(noContainer.stderr.trim().split('\n').length, 1);
  assert.equal((await runCli(['wait', uid, '--timeout', 'soon', '--runtime-socket', socket])).code, 2);
  const nothing = await runCli(['wait', uid, '--runtime-socket', join(dirname(socket), 'none.sock')]);
  assert.equal(nothing.code, 3);

  // The mounts were handed to a runtime: removing the manifest holds the volumes.
  await rm(join(manifests, 'web.json'));
  const held = await waitFor('pod terminating', async () => {
    const s = (await get(socket, `/v1/pods/${uid}/volumes?for=unmounted`)).body;
    return s.terminating ? s : undefined;
  });
  assert.equal(held.ready, false);
  assert.ok((held.terminating as { secondsLeft: number }).secondsLeft <= 30);
  assert.equal(
    (await mountsBelow(podDir)).length,
    below.length,
    'volumes and subpaths stay mounted while terminating',
  );
  const status = (await p.status()).pods.find((x) => x.uid === uid);
  assert.ok(status?.terminating, '/status shows the pod terminating');
  const timedOut = await runCli([
    'wait',
    uid,
    '--for',
    'unmounted',
    '--timeout',
    '300ms',
    '--runtime-socket',
    socket,
  ]);
  assert.equal(timedOut.code, 1);
  assert.match(timedOut.stderr, /timed out/);

  const term = await callRuntime(socket, 'POST', `/v1/pods/${uid}/terminated`, 10_000);
  assert.equal(term.status, 200);
  const gone = await runCli([
    'wait',
    uid,
    '--for',
    'unmounted',
    '--timeout',
    '60s',
    '--runtime-socket',
    socket,
  ]);
  assert.equal(gone.code, 0, gone.stderr);
  await waitFor(
    'subpaths and volumes unmounted',
    async () => (await mountsBelow(podDir)).length === 0,
    120_000,
  );
  assert.equal((await callRuntime(socket, 'POST', '/v1/pods/never-seen/terminated', 10_000)).status, 404);
});

mountTest('runtime socket: a pod never handed to a runtime is torn down at once', async (t) => {
  const { manifests, root, socket } = await setup(t);
  await writeFile(join(manifests, 'quick.json'), manifest('quick', webSpec));
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  const uid = await uidOf(socket, 'quick-testnode');
  assert.equal((await get(socket, `/v1/pods/${uid}/volumes?wait=120`)).status, 200);
  await rm(join(manifests, 'quick.json'));
  const gone = await get(socket, `/v1/pods/${uid}/volumes?for=unmounted&wait=120`);
  assert.equal(gone.status, 200);
  await waitFor(
    'volumes unmounted',
    async () => (await mountsBelow(join(root, 'pods', uid))).length === 0,
    120_000,
  );
});

mountTest('runtime socket: a caller that is not root is refused by its peer credentials', async (t) => {
  const { dir, manifests, root, socket } = await setup(t);
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  // Open the filesystem permissions wide: only the credential check stands in the way.
  for (const d of [dir, root, dirname(socket)]) await chmod(d, 0o755);
  await chmod(socket, 0o666);
  const script = `require('node:http').get({ socketPath: ${JSON.stringify(socket)}, path: '/v1/pods' }, (r) => { let b=''; r.on('data', d => b += d); r.on('end', () => console.log(r.statusCode, b)); }).on('error', (e) => console.log('error', e.message));`;
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('setpriv', [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      process.execPath,
      '-e',
      script,
    ]);
    let s = '';
    child.stdout.on('data', (d) => (s += d));
    child.stderr.on('data', (d) => (s += d));
    child.on('error', reject);
    child.on('close', () => resolve(s));
  });
  assert.match(out, /^403 .*"reason":"Forbidden"/, out);
  assert.match(out, /caller uid 65534 is not allowed/);
  assert.equal((await get(socket, '/v1/pods')).status, 200, 'root still gets in');
  await waitFor('refusal logged', () =>
    p.logLines().some((l) => l.msg === 'runtime socket caller refused' && l.uid === 65534),
  );
  await lstat(socket);
});

const sizedPod = (sizeLimit: string, uid?: string) =>
  manifest(
    'sized',
    {
      containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
      volumes: [{ name: 'cache', emptyDir: { medium: 'Memory', sizeLimit } }],
    },
    uid ? { uid } : {},
  );

mountTest(
  'static pod edits: with an explicit UID nothing is unmounted; without one the edit is a new pod and the old one waits for terminated',
  async (t) => {
    const { manifests, root, socket } = await setup(t);
    await writeFile(join(manifests, 'fixed.json'), sizedPod('16Mi', 'fixed-uid-1'));
    await writeFile(join(manifests, 'sized.json'), sizedPod('16Mi').replace('"sized"', '"hashed"'));
    const p = await startPodvol({ rootDir: root, manifests });
    t.after(() => p.stop());
    const cacheOf = (uid: string) => join(root, 'pods', uid, 'volumes/kubernetes.io~empty-dir/cache');

    // Explicit UID: the sizeLimit edit is reported, the tmpfs and its content stay.
    assert.equal((await get(socket, '/v1/pods/fixed-uid-1/volumes?wait=120')).status, 200);
    await writeFile(join(cacheOf('fixed-uid-1'), 'keep'), 'data');
    const mountsOfFixed = await mountsBelow(join(root, 'pods', 'fixed-uid-1'));
    assert.equal(mountsOfFixed.length, 1, 'the tmpfs');
    await writeFile(join(manifests, 'fixed.json'), sizedPod('32Mi', 'fixed-uid-1'));
    const reported = await waitFor('SpecChangeRequiresRestart', async () => {
      const v = (
        (await get(socket, '/v1/pods/fixed-uid-1/volumes')).body.volumes as {
          reason: string;
          state: string;
        }[]
      )[0];
      return v?.reason === 'SpecChangeRequiresRestart' ? v : undefined;
    });
    assert.equal(reported.state, 'mounted');
    assert.equal(
      await readFile(join(cacheOf('fixed-uid-1'), 'keep'), 'utf8'),
      'data',
      'the volume was not emptied',
    );
    assert.deepEqual(await mountsBelow(join(root, 'pods', 'fixed-uid-1')), mountsOfFixed, 'the same mount');
    assert.ok(!p.logLines().some((l) => l.msg === 'UnmountVolume.TearDown succeeded'));

    // No UID: the edit makes a new pod; the old one, handed to a runtime, is held until terminated.
    const oldUID = await uidOf(socket, 'hashed-testnode');
    assert.equal((await get(socket, `/v1/pods/${oldUID}/volumes?wait=120`)).status, 200);
    assert.equal((await get(socket, `/v1/pods/${oldUID}/containers/app/mounts`)).status, 200);
    await writeFile(join(manifests, 'sized.json'), sizedPod('32Mi').replace('"sized"', '"hashed"'));
    const newUID = await waitFor('the edited manifest is a new pod', async () => {
      const pods = (await get(socket, '/v1/pods')).body.pods as { uid: string; name: string }[];
      return pods.find((x) => x.name === 'hashed-testnode' && x.uid !== oldUID)?.uid;
    });
    assert.equal((await get(socket, `/v1/pods/${newUID}/volumes?wait=120`)).status, 200);
    const old = (await get(socket, `/v1/pods/${oldUID}/volumes?for=unmounted`)).body;
    assert.ok(old.terminating, 'the old pod is terminating');
    assert.equal((await mountsBelow(join(root, 'pods', oldUID))).length, 1, 'its volume stays mounted');
    assert.equal(
      (await runCli(['wait', 'default/hashed-testnode', '--runtime-socket', socket])).code,
      0,
      'the name resolves to the new pod',
    );
    assert.equal((await callRuntime(socket, 'POST', `/v1/pods/${oldUID}/terminated`, 10_000)).status, 200);
    assert.equal((await get(socket, `/v1/pods/${oldUID}/volumes?for=unmounted&wait=120`)).status, 200);
    assert.equal((await mountsBelow(join(root, 'pods', newUID))).length, 1, 'the new pod keeps its volume');
  },
);
