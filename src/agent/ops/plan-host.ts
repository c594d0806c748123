// What `podvol plan` knows of this node, gathered without changing anything:
// a VolumeHost whose mounter refuses every call (the plugins are only asked
// for paths), the machine's allocatable memory, whether tmpfs takes noswap,
// and a read-only stat of hostPath targets.
import { statSync } from 'node:fs';
import { release } from 'node:os';
import { resolve } from 'node:path';
import { kernelSupportsTmpfsNoswap } from '../../mount/probe.ts';
import type * as mount from '../../mount/types.ts';
import { probeVolumePlugins } from '../../plugins/index.ts';
import { VolumePluginMgr } from '../../plugins/plugin-manager.ts';
import { createVolumeHost } from '../../volumehost/host.ts';
import type { VolumeHost } from '../../volumehost/types.ts';

/** What a hostPath target is right now; `missing` for any stat error, as mount-utils' PathExists. */
export type HostPathFound =
  | 'missing'
  | 'Directory'
  | 'File'
  | 'Socket'
  | 'CharDevice'
  | 'BlockDevice'
  | 'other';

export interface PlanContext {
  /** Absolute, as the daemon resolves it. */
  rootDir: string;
  nodeName: string;
  host: VolumeHost;
  pluginMgr: VolumePluginMgr;
  /** tmpfs gets `noswap` (Linux >= 6.4). */
  noswap: boolean;
  inspectHostPath(path: string): HostPathFound;
}

/** stat(2), following symlinks as kubelet's GetFileType does. Reads only. */
export function inspectHostPath(path: string): HostPathFound {
  let st: import('node:fs').Stats;
  try {
    st = statSync(path);
  } catch {
    return 'missing';
  }
  if (st.isSocket()) return 'Socket';
  if (st.isBlockDevice()) return 'BlockDevice';
  if (st.isCharacterDevice()) return 'CharDevice';
  if (st.isDirectory()) return 'Directory';
  if (st.isFile()) return 'File';
  return 'other';
}

// The plan only asks plugins for paths; reaching the mount layer would be a bug.
function refusingMounter(): mount.Interface {
  const refuse = (): Promise<never> =>
    Promise.reject(new Error('podvol plan must not touch the mount table (this is a bug)'));
  return {
    mount: refuse,
    unmount: refuse,
    unmountWithForce: refuse,
    isLikelyNotMountPoint: refuse,
    isMountPoint: refuse,
    list: refuse,
    getMountRefs: refuse,
    cleanupMountPoint: refuse,
  };
}

export interface PlanContextOptions {
  rootDir: string;
  nodeName: string;
  /** Node allocatable (default: the machine's, as a standalone podvol uses). */
  allocatable?: Record<string, string>;
  noswap?: boolean;
  inspectHostPath?: (path: string) => HostPathFound;
}

export function createPlanContext(o: PlanContextOptions): PlanContext {
  const rootDir = resolve(o.rootDir);
  const pluginMgr = new VolumePluginMgr();
  const allocatable = o.allocatable;
  const host = createVolumeHost({
    rootDir,
    nodeName: o.nodeName,
    mounter: refusingMounter(),
    pluginMgr,
    cluster: allocatable
      ? { node: () => ({ labels: { 'kubernetes.io/hostname': o.nodeName }, allocatable }) }
      : undefined,
  });
  pluginMgr.initPlugins(probeVolumePlugins(), host);
  return {
    rootDir,
    nodeName: o.nodeName,
    host,
    pluginMgr,
    noswap: o.noswap ?? kernelSupportsTmpfsNoswap(release()),
    inspectHostPath: o.inspectHostPath ?? inspectHostPath,
  };
}
