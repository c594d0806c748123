// The runtime API's view of the volume manager (RuntimeState), and the
// teardown rule's hooks into it.
import type { VolumePluginMgr } from '../../volumehost/plugin-manager.ts';
import type { VolumeManager } from '../volumemanager/volume-manager.ts';
import type { TerminationGate } from './termination.ts';
import type { PodVolume, RuntimeState } from './types.ts';

export function runtimeStateOf(
  vm: VolumeManager,
  pluginMgr: VolumePluginMgr,
  gate: TerminationGate,
): RuntimeState {
  const state: RuntimeState = {
    desiredPod(uid) {
      const p = vm.dsw.pod(uid);
      if (!p) return undefined;
      const volumes = new Map<string, PodVolume>();
      for (const v of p.volumes.values()) {
        volumes.set(v.volumeName, {
          name: v.volumeName,
          pluginName: v.pluginName,
          spec: v.spec,
          path: v.path,
        });
      }
      return { pod: p.pod, volumes };
    },
    podStatus: (uid) => vm.podStatus(uid),
    pods: () => vm.status(),
    hasMountedVolumes: (uid) => vm.asw.hasPod(uid),
    onChange: (fn) => vm.subscribe(fn),
    volumeReadOnly(v, pod) {
      if (!v.pluginName || !v.spec) return false;
      return (
        v.spec.readOnly ||
        pluginMgr.findPluginByName(v.pluginName).newMounter(v.spec, pod).getAttributes().readOnly
      );
    },
    async markHandedOff(uid) {
      const p = vm.dsw.pod(uid);
      if (p) await gate.markHandedOff(p.pod);
    },
    markTerminated: (uid) =>
      gate.markTerminated(
        uid,
        vm.dsw.pod(uid) !== undefined || vm.asw.hasPod(uid) || gate.held(uid) !== undefined,
      ),
  };
  return state;
}
