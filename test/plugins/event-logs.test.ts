// Without an API server Events go to the log at debug (kubelet logs Events at
// -v=3): every failed SetUp has op.failed's warn line already. An Event nothing
// else logs gets a warn line where it is emitted (here local's AlreadyMountedVolume).
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../src/logger.ts';
import { probeVolumePlugins } from '../../src/plugins/index.ts';
import { createVolumeHost } from '../../src/volumehost/host.ts';
import { VolumePluginMgr } from '../../src/volumehost/plugin-manager.ts';
import type { Spec } from '../../src/volumehost/volume.ts';
import { FakeMounter } from '../helpers/fake-mounter.ts';

type Line = { level: string; obj: Record<string, unknown>; msg: string | undefined };

function recordingLogger(lines: Line[]): Logger {
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg?: string): void => {
      lines.push({ level, obj, msg });
    };
  const logger: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => logger,
  };
  return logger;
}

async function standaloneHost(t: import('node:test').TestContext) {
  const root = await mkdtemp(join(tmpdir(), 'podvol-events-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const lines: Line[] = [];
  const mounter = new FakeMounter({ mounts: [{ mountPoint: '/', fsType: 'ext4' }] });
  const pluginMgr = new VolumePluginMgr();
  const host = createVolumeHost({
    rootDir: root,
    nodeName: 'node1',
    mounter,
    pluginMgr,
    logger: recordingLogger(lines),
    cluster: { node: () => ({ labels: {}, allocatable: { memory: '1Gi', cpu: '2' } }) },
  });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  return { root, host, pluginMgr, lines };
}

const podOf = (uid: string, fsGroup: number): V1Pod => ({
  metadata: { name: `p-${uid}`, namespace: 'default', uid },
  spec: { containers: [{ name: 'c' }], securityContext: { fsGroup } },
});

test('without an API server an Event is logged at debug, not as a second warn line', async (t) => {
  const { host, lines } = await standaloneHost(t);
  host.getEventRecorder().eventf(podOf('a', 1), 'Warning', 'FailedMount', 'MountVolume.SetUp failed ...');
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [['debug', 'MountVolume.SetUp failed ...']],
  );
});

test("local's AlreadyMountedVolume, which no other line reports, is one warn line", async (t) => {
  const { root, pluginMgr, lines } = await standaloneHost(t);
  const source = join(root, 'disk');
  await mkdir(source);
  const spec: Spec = {
    volume: { name: 'data' },
    persistentVolume: {
      metadata: { name: 'pv-local' },
      spec: { local: { path: source }, capacity: { storage: '1Gi' } },
    },
    readOnly: false,
  };
  for (const [uid, fsGroup] of [
    ['a', 1234],
    ['b', 5678],
  ] as const) {
    await mkdir(join(root, 'pods', uid, 'volumes'), { recursive: true });
    await pluginMgr.findPluginBySpec(spec).newMounter(spec, podOf(uid, fsGroup)).setUp({ fsGroup });
  }
  // The fake mounter binds nothing: the first pod's fsGroup went to its own directory, not to the disk.
  const { gid } = await stat(source);
  const message = `The requested fsGroup is 5678, but the volume pv-local has GID ${gid}. The volume may not be shareable.`;
  assert.deepEqual(
    lines.filter((l) => l.msg === message).map((l) => [l.level, l.obj.reason ?? l.obj.event]),
    [
      ['warn', 'AlreadyMountedVolume'],
      ['debug', { type: 'Warning', reason: 'AlreadyMountedVolume' }],
    ],
  );
});
