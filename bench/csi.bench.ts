// Benchmark of the CSI plugin: N PersistentVolumes staged and published (one
// pod each), then unpublished and unstaged, through real gRPC to the test CSI
// driver (real bind mounts). The baseline, measured in the same run, is the
// driver's own time for the same calls (what any node agent must wait for);
// the ratio is podvol's wall time over it. Needs root: it re-runs itself in a
// private mount namespace so no mount reaches the host.
// Run: node bench/csi.bench.ts [volumes]
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createLinuxMounter } from '../src/mount/linux.ts';
import { csiPlugin } from '../src/plugins/csi/csi-plugin.ts';
import { DriversStore } from '../src/plugins/csi/drivers.ts';
import { VolumePluginMgr } from '../src/plugins/plugin-manager.ts';
import { createVolumeHost } from '../src/volumehost/host.ts';
import { readCalls, startTestDriver, writeDriverConfig } from '../test/csi/driver.ts';

const N = Number(process.argv[2] ?? 100);

if (process.env.PODVOL_MOUNTNS !== '1') {
  if (process.getuid?.() !== 0) {
    process.stderr.write('csi.bench needs root (it mounts)\n');
    process.exit(1);
  }
  const r = spawnSync(
    'unshare',
    ['--mount', '--propagation', 'private', process.execPath, ...process.argv.slice(1)],
    {
      stdio: 'inherit',
      env: { ...process.env, PODVOL_MOUNTNS: '1' },
    },
  );
  process.exit(r.status ?? 1);
}

const DRIVER = 'bench.csi.podvol.io';
const base = mkdtempSync(join(tmpdir(), 'podvol-csi-bench-'));
const root = join(base, 'root');
const stateDir = join(base, 'driver');
mkdirSync(join(root, 'plugins', DRIVER), { recursive: true });
writeDriverConfig(stateDir, { name: DRIVER, nodeID: 'n1', capabilities: ['STAGE_UNSTAGE_VOLUME'] });
const driver = await startTestDriver(join(root, 'plugins', DRIVER, 'csi.sock'), stateDir);
try {
  const drivers = new DriversStore();
  drivers.set({ name: DRIVER, endpoint: driver.socket, version: '1.0.0', registrationSocket: '' });
  const mounter = createLinuxMounter({ systemd: 'off' });
  const pluginMgr = new VolumePluginMgr();
  const csiDriverObject = { metadata: { name: DRIVER }, spec: { attachRequired: false } };
  const host = createVolumeHost({
    rootDir: root,
    nodeName: 'benchnode',
    mounter,
    pluginMgr,
    logger: pino({ level: 'silent' }),
    cluster: {
      csiDrivers: {
        get: (name) => (name === DRIVER ? csiDriverObject : undefined),
        list: () => [csiDriverObject],
        hasSynced: () => true,
        waitForCacheSync: async () => {},
      },
    },
  });
  const plugin = csiPlugin({ drivers });
  pluginMgr.initPlugins([plugin], host);

  const volumes = Array.from({ length: N }, (_, i) => ({
    pod: {
      metadata: {
        name: `p${i}`,
        namespace: 'default',
        uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      },
    },
    spec: {
      volume: { name: 'data', persistentVolumeClaim: { claimName: `c${i}` } },
      persistentVolume: {
        metadata: { name: `pv-${i}` },
        spec: { accessModes: ['ReadWriteOnce'], csi: { driver: DRIVER, volumeHandle: `vol-${i}` } },
      },
      readOnly: false,
    },
  }));
  const driverMs = (from: number) =>
    readCalls(stateDir)
      .slice(from)
      .reduce((sum, c) => sum + c.ms, 0);

  const phase = async (name: string, fn: (v: (typeof volumes)[number]) => Promise<void>) => {
    const from = readCalls(stateDir).length;
    const t0 = performance.now();
    for (const v of volumes) await fn(v);
    const wall = performance.now() - t0;
    const calls = readCalls(stateDir).slice(from);
    const own = driverMs(from);
    process.stdout.write(
      `${name.padEnd(20)} ${N} volumes  podvol ${wall.toFixed(0).padStart(6)} ms  driver ${own.toFixed(0).padStart(6)} ms (${calls.length} calls)  ratio ${(wall / own).toFixed(2)}  per volume ${(wall / N).toFixed(1)} ms\n`,
    );
    return { wall, own };
  };

  const up = await phase('stage+publish', (v) => plugin.newMounter(v.spec, v.pod).setUp({}));
  const down = await phase('unpublish+unstage', (v) =>
    plugin.newUnmounter(`pv-${v.pod.metadata.name.slice(1)}`, v.pod.metadata.uid).tearDown(),
  );
  const total = (up.wall + down.wall) / (up.own + down.own);
  process.stdout.write(`overall ratio ${total.toFixed(2)} (target ≤ 2)\n`);
} finally {
  await driver.stop();
  rmSync(base, { recursive: true, force: true });
}
