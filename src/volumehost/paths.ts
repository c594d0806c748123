// kubelet's directory getters (pkg/kubelet/kubelet_getters.go), as plain functions
// over the root directory so the agent, plugins and `podvol plan` agree on them.
import { join } from 'node:path';

/** `kubernetes.io/empty-dir` → `kubernetes.io~empty-dir`: how a plugin name becomes one path element (k/k pkg/util/strings). */
export const escapeQualifiedName = (name: string): string => name.replaceAll('/', '~');
/** Inverse of escapeQualifiedName, for volume directories read back from disk. */
export const unescapeQualifiedName = (name: string): string => name.replaceAll('~', '/');

/** ValidatePathNoBacksteps's rule (k/k pkg/volume/validation): a `..` element anywhere in the path. */
export const hasBacksteps = (path: string): boolean => path.split('/').includes('..');

export const podsDir = (root: string) => join(root, 'pods');
export const podDir = (root: string, uid: string) => join(root, 'pods', uid);
export const podVolumesDir = (root: string, uid: string) => join(podDir(root, uid), 'volumes');
export const podVolumeDir = (root: string, uid: string, escapedPlugin: string, volume: string) =>
  join(podVolumesDir(root, uid), escapedPlugin, volume);
export const podPluginsDir = (root: string, uid: string) => join(podDir(root, uid), 'plugins');
export const podPluginDir = (root: string, uid: string, escapedPlugin: string) =>
  join(podPluginsDir(root, uid), escapedPlugin);
export const pluginsDir = (root: string) => join(root, 'plugins');
/** Not escaped, as in kubelet: kubernetes.io/csi becomes nested directories. */
export const pluginDir = (root: string, plugin: string) => join(pluginsDir(root), plugin);
/**
 * podvol's own per-volume records, used to rebuild state after a restart. Kept
 * outside <root>/pods so a pod's directory looks exactly like kubelet's.
 */
export const podVolumeRecordsRoot = (root: string) => join(root, 'podvol', 'pods');
export const podVolumeRecordsDir = (root: string, uid: string) => join(podVolumeRecordsRoot(root), uid);
