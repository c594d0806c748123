// Benchmark of the CSI plugin: N PersistentVolumes staged and published (one
// pod each), then unpublished and unstaged, through real gRPC to the test CSI
// driver (real bind mounts). The baseline, measured in the same run, is the
// driver's own time for the same calls (what any node agent must wait for);
// the ratio is podvol's wall time over it. Needs root: it re-runs itself in a
// private mount namespace so no mount reaches the host (bench/lib.ts).
// Run: node bench/csi.bench.ts [volumes]
import { readCalls } from '../test/csi/driver.ts';
import { claimVolume, setUpVolume, startHarness, unmountDeviceOf } from '../test/csi/harness.ts';
import { ensureMountNamespace, tempRoot } from './lib.ts';

const N = Number(process.argv[2] ?? 100);

ensureMountNamespace();

const tmp = tempRoot('csi');
const base = tmp.dir;
const h = await startHarness(base, { driverName: 'bench.csi.podvol.io' });
const { plugin, stateDir } = h;
try {
  const volumes = Array.from({ length: N }, (_, i) => claimVolume(h, i));
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

  // What the volume manager's operations call: MountDevice + SetUp, then TearDown + UnmountDevice.
  const up = await phase('stage+publish', (v) => setUpVolume(plugin, v));
  // A restart's device reconstruction: every staging vol_data.json read once by a new plugin.
  const r0 = performance.now();
  const found = await h.newPlugin().constructDeviceSpecs();
  process.stdout.write(
    `device reconstruction ${found.length} staged volumes  ${(performance.now() - r0).toFixed(2)} ms (no driver call)\n`,
  );
  const down = await phase('unpublish+unstage', async (v) => {
    await plugin.newUnmounter(v.inner, v.uid).tearDown();
    await unmountDeviceOf(plugin, v);
  });
  const total = (up.wall + down.wall) / (up.own + down.own);
  process.stdout.write(`overall ratio ${total.toFixed(2)} (target ≤ 2)\n`);
} finally {
  await h.stop();
  tmp.cleanup();
}
