// The plugin watcher and the CSI registration handler against the test
// registrar and the test driver, over real gRPC on unix sockets.
import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import pino from 'pino';
import { PluginWatcher } from '../../../src/agent/plugin-watcher.ts';
import { DriversStore, highestSupportedVersion } from '../../../src/plugins/csi/drivers.ts';
import { loadCSIProto } from '../../../src/plugins/csi/grpc.ts';
import { csiRegistrationHandler, type NodeInfoManager } from '../../../src/plugins/csi/registration.ts';
import { startTestDriver, writeDriverConfig } from '../../csi/driver.ts';
import { startTestRegistrar } from '../../csi/registrar.ts';
import { waitFor } from '../../helpers/daemon.ts';
import { tempDir } from '../../helpers/mountns.ts';

const logger = pino({ level: 'silent' });

function recordingNodeInfo(): NodeInfoManager & { calls: unknown[][] } {
  const calls: unknown[][] = [];
  return {
    calls,
    async installCSIDriver(...args) {
      calls.push(['install', ...args]);
    },
    async uninstallCSIDriver(name) {
      calls.push(['uninstall', name]);
    },
  };
}

async function setup(t: TestContext, name = 'test.csi.podvol.io') {
  const base = await tempDir(t, 'pv-reg-');
  const registry = join(base, 'plugins_registry');
  const stateDir = join(base, 'driver');
  await mkdir(registry, { recursive: true });
  writeDriverConfig(stateDir, {
    name,
    nodeID: 'node-id-1',
    maxVolumesPerNode: 7,
    topology: { 'topology.test.csi/zone': 'z1' },
    capabilities: ['STAGE_UNSTAGE_VOLUME'],
  });
  const driver = await startTestDriver(join(base, 'csi.sock'), stateDir);
  t.after(() => driver.stop());
  const drivers = new DriversStore();
  const nodeInfo = recordingNodeInfo();
  const handler = csiRegistrationHandler({ drivers, proto: loadCSIProto(), nodeInfo, logger });
  const watcher = new PluginWatcher({
    dir: registry,
    handlers: { CSIPlugin: handler },
    logger,
    // No periodic scan within a test's life: every registration here comes from an inotify event.
    periodMs: 3_600_000,
  });
  await watcher.start();
  t.after(() => watcher.stop());
  return { base, registry, driver, drivers, nodeInfo, watcher, stateDir };
}

test('a registrar socket registers the driver, which gets NodeGetInfo published', async (t) => {
  const s = await setup(t);
  const reg = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  t.after(() => reg.stop());
  assert.deepEqual(await reg.status, { plugin_registered: true, error: '' });
  const d = s.drivers.get('test.csi.podvol.io');
  assert.equal(d?.endpoint, s.driver.socket);
  assert.equal(d?.version, '1.0.0');
  assert.equal(d?.nodeID, 'node-id-1');
  assert.deepEqual(s.nodeInfo.calls, [
    ['install', 'test.csi.podvol.io', 'node-id-1', 7, { 'topology.test.csi/zone': 'z1' }],
  ]);

  // Removing the socket deregisters the driver and uninstalls it from the node.
  await reg.stop();
  await waitFor('driver deregistered', async () => s.drivers.get('test.csi.podvol.io') === undefined);
  assert.deepEqual(s.nodeInfo.calls.at(-1), ['uninstall', 'test.csi.podvol.io']);
});

test('sockets in subdirectories register; dotfiles and plain files are ignored', async (t) => {
  const s = await setup(t);
  await writeFile(join(s.registry, 'not-a-socket'), 'x');
  await mkdir(join(s.registry, 'sub'));
  const hidden = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'hidden.csi',
    endpoint: s.driver.socket,
    socketName: '.hidden-reg.sock',
  });
  t.after(() => hidden.stop());
  const reg = await startTestRegistrar({
    registrationDir: join(s.registry, 'sub'),
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  t.after(() => reg.stop());
  assert.equal((await reg.status).plugin_registered, true);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(hidden.notifications.length, 0);
  assert.deepEqual(
    s.drivers.list().map((d) => d.name),
    ['test.csi.podvol.io'],
  );
});

test('without a periodic scan: a socket in a directory tree made after start registers, and re-registers when replaced', async (t) => {
  const s = await setup(t);
  const deep = join(s.registry, 'a', 'b');
  await mkdir(deep, { recursive: true });
  const first = await startTestRegistrar({
    registrationDir: deep,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  assert.equal((await first.status).plugin_registered, true);
  await first.stop();
  await waitFor('driver deregistered', async () => s.drivers.get('test.csi.podvol.io') === undefined);
  // The registrar restarted: a new socket at the same path.
  const again = await startTestRegistrar({
    registrationDir: deep,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  t.after(() => again.stop());
  assert.equal((await again.status).plugin_registered, true);
  assert.equal(
    s.drivers.get('test.csi.podvol.io')?.registrationSocket,
    join(deep, 'test.csi.podvol.io-reg.sock'),
  );
});

test('a second registration of the same driver at the same version is refused, a higher one accepted', async (t) => {
  const s = await setup(t);
  const first = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  t.after(() => first.stop());
  assert.equal((await first.status).plugin_registered, true);
  const same = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
    socketName: 'again-reg.sock',
  });
  t.after(() => same.stop());
  const refused = await same.status;
  assert.equal(refused.plugin_registered, false);
  assert.match(refused.error, /already registered at version 1\.0\.0/);
  const higher = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
    socketName: 'higher-reg.sock',
    versions: ['1.0.0', '1.2.0', '2.0.0'],
  });
  t.after(() => higher.stop());
  assert.equal((await higher.status).plugin_registered, true);
  assert.equal(s.drivers.get('test.csi.podvol.io')?.version, '1.2.0');
});

test('unknown plugin types and unsupported versions are told why', async (t) => {
  const s = await setup(t);
  const device = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'gpu',
    endpoint: s.driver.socket,
    type: 'DevicePlugin',
  });
  t.after(() => device.stop());
  assert.match((await device.status).error, /no handler registered for plugin type: DevicePlugin/);
  const old = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'old.csi',
    endpoint: s.driver.socket,
    versions: ['0.3.0'],
  });
  t.after(() => old.stop());
  assert.match((await old.status).error, /must be v1\.x/);
  assert.equal(s.drivers.list().length, 0);
});

test('a driver whose NodeGetInfo fails is not registered; a stale socket is not fatal', async (t) => {
  const s = await setup(t);
  writeDriverConfig(s.stateDir, {
    name: 'test.csi.podvol.io',
    nodeID: 'n',
    capabilities: [],
    errors: { NodeGetInfo: { code: 13, message: 'boom' } },
  });
  // A stale socket: a path that is a socket nobody serves (a registrar that died).
  const stale = createServer();
  await new Promise<void>((r) => stale.listen(join(s.registry, 'stale-reg.sock'), r));
  stale.close();
  const reg = await startTestRegistrar({
    registrationDir: s.registry,
    driverName: 'test.csi.podvol.io',
    endpoint: s.driver.socket,
  });
  t.after(() => reg.stop());
  const st = await reg.status;
  assert.equal(st.plugin_registered, false);
  assert.match(st.error, /NodeGetInfo failed: rpc error: code = Internal desc = boom/);
  assert.equal(s.drivers.get('test.csi.podvol.io'), undefined);
  await rm(join(s.registry, 'stale-reg.sock'), { force: true });
});

test('highestSupportedVersion follows kubelet', () => {
  assert.equal(highestSupportedVersion(['1.0.0']), '1.0.0');
  assert.equal(highestSupportedVersion(['0.3.0', '1.1', 'v1.5.0', '2.0.0']), '1.5.0');
  assert.throws(() => highestSupportedVersion([]), /empty array/);
  assert.throws(() => highestSupportedVersion(['0.3.0']), /must be v1\.x/);
  assert.throws(() => highestSupportedVersion(['2.0.0']), /could not find a highest supported version/);
});
