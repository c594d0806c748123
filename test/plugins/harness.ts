// What kubelet's plugin tests build (volumetesting.NewFakeVolumeHost): a host on
// a temp directory with the fake mounter, the real plugins, and no root needed.
// The fake mounter mounts nothing, so the filesystem handed to the plugins
// reports a tmpfs or hugetlbfs wherever the fake's table has one (statfs), as
// kubelet's tests fake the mount medium.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';
import { mountContaining } from '../../src/mount/mountinfo.ts';
import { HUGETLBFS_MAGIC, TMPFS_MAGIC } from '../../src/mount/probe.ts';
import { probeVolumePlugins } from '../../src/plugins/index.ts';
import { nodeFsOps } from '../../src/volumehost/fs.ts';
import { type ClusterBackend, createVolumeHost } from '../../src/volumehost/host.ts';
import { VolumePluginMgr } from '../../src/volumehost/plugin-manager.ts';
import type { VolumeHost } from '../../src/volumehost/types.ts';
import type { Mounter, Spec, Unmounter } from '../../src/volumehost/volume.ts';
import { FakeMounter } from '../helpers/fake-mounter.ts';

export interface PluginHarness {
  root: string;
  mounter: FakeMounter;
  host: VolumeHost;
  pluginMgr: VolumePluginMgr;
  /** The volume's mounter, once the pod's directories exist (the mount operation's makePodDataDirs). */
  mounterFor(pod: V1Pod, volumeName: string): Promise<Mounter>;
  unmounterFor(pod: V1Pod, volumeName: string): Unmounter;
}

export async function pluginHarness(t: TestContext, cluster: ClusterBackend = {}): Promise<PluginHarness> {
  const root = await mkdtemp(join(tmpdir(), 'podvol-plugin-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const mounter = new FakeMounter({ mounts: [{ mountPoint: '/', fsType: 'ext4' }] });
  const real = nodeFsOps();
  const magic: Record<string, number> = { tmpfs: TMPFS_MAGIC, hugetlbfs: HUGETLBFS_MAGIC };
  const fs = {
    ...real,
    statfsType: async (path: string) =>
      magic[mountContaining(mounter.table(), path)?.fsType ?? ''] ?? (await real.statfsType(path)),
  };
  const pluginMgr = new VolumePluginMgr();
  const host = createVolumeHost({
    rootDir: root,
    nodeName: 'node1',
    mounter,
    fs,
    pluginMgr,
    cluster: { node: () => ({ labels: {}, allocatable: { memory: '1Gi', cpu: '2' } }), ...cluster },
  });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  const specOf = (pod: V1Pod, volumeName: string): Spec => {
    const volume = pod.spec?.volumes?.find((v) => v.name === volumeName);
    if (!volume) throw new Error(`pod has no volume ${volumeName}`);
    return { volume, readOnly: false };
  };
  return {
    root,
    mounter,
    host,
    pluginMgr,
    async mounterFor(pod, name) {
      for (const d of ['volumes', 'plugins'])
        await mkdir(join(root, 'pods', pod.metadata?.uid ?? '', d), { recursive: true, mode: 0o750 });
      return pluginMgr.findPluginBySpec(specOf(pod, name)).newMounter(specOf(pod, name), pod);
    },
    unmounterFor: (pod, name) =>
      pluginMgr.findPluginBySpec(specOf(pod, name)).newUnmounter(name, pod.metadata?.uid ?? ''),
  };
}

/**
 * The pod the validation tests check: one container and `volumes` as a client
 * sends them, unchecked (the tests feed volumes the types would not allow).
 */
export function validationPod(container: V1Container, volumes: unknown[]): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'default', uid: 'u' },
    // Unchecked on purpose: validation is what checks them.
    spec: { containers: [container], volumes: volumes as V1Volume[] },
  };
}
