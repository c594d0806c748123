// CSI in `podvol plan`. A CSI volume's SetUp and TearDown are its driver's
// (NodeStageVolume, NodePublishVolume, NodeUnpublishVolume, NodeUnstageVolume
// over its socket), and a plan talks to no driver. So the plan runs the real
// CSI plugin as far as it goes without one: the daemon's mount operation (pod
// directories, podvol's record), the plugin's own path and its checks before
// the driver (driver name, volume handle, the CSIDriver object's lifecycle
// modes); then, where the driver would be called, one `driver` step names the
// driver and the calls that are not planned. What the driver would create (the
// `mount` directory, vol_data.json, the staging directory) is not shown.
import type { V1Pod } from '@kubernetes/client-node';
import { checkCSIVolumeWithoutDriver, csiPlugin } from '../../plugins/csi/csi-plugin.ts';
import { DriversStore } from '../../plugins/csi/drivers.ts';
import type { VolumeHost } from '../../volumehost/types.ts';
import type { Mounter, Spec, Unmounter, VolumePlugin } from '../../volumehost/volume.ts';

/** The driver calls the daemon would make, as the plan reports them. */
export interface DriverStep {
  action: 'driver';
  path: string;
  detail: string;
}

/** The CSI plugin for a plan: the real one up to the driver, then a `driver` step. */
export function planCSIPlugin(record: (s: DriverStep) => void): VolumePlugin {
  // No driver is ever registered here, so nothing below reaches a socket or the host's disk.
  const real = csiPlugin({ drivers: new DriversStore() });
  let host: VolumeHost | undefined;
  const lister = (driver: string) => host?.csiDriverLister()?.get(driver);
  return {
    name: real.name,
    init(h) {
      host = h;
      real.init(h);
    },
    canSupport: (spec) => real.canSupport(spec),
    requiresRemount: (spec) => real.requiresRemount(spec),
    constructVolumeSpec: (name, path) => real.constructVolumeSpec(name, path),
    newMounter(spec: Spec, pod: V1Pod): Mounter {
      const m = real.newMounter(spec, pod);
      const setUpAt = async (dir: string) => {
        const v = checkCSIVolumeWithoutDriver(spec, pod, lister);
        const calls = v.mayStage
          ? 'NodeStageVolume (when the driver stages) and NodePublishVolume are'
          : 'NodePublishVolume is';
        record({
          action: 'driver',
          path: dir,
          detail: `needs CSI driver ${v.driver} (${v.mode === 'Ephemeral' ? 'inline ephemeral' : 'persistent'} volume ${v.handle}): ${calls} the driver's and not planned`,
        });
      };
      return {
        getPath: () => m.getPath(),
        getAttributes: () => m.getAttributes(),
        setUp: () => setUpAt(m.getPath()),
        setUpAt,
      };
    },
    newUnmounter(volumeName: string, podUID: string): Unmounter {
      const u = real.newUnmounter(volumeName, podUID);
      const tearDownAt = async (dir: string) => {
        record({
          action: 'driver',
          path: dir,
          detail:
            "NodeUnpublishVolume (and NodeUnstageVolume once no pod uses the staged volume) are the driver's and not planned",
        });
      };
      return { getPath: () => u.getPath(), tearDown: () => tearDownAt(u.getPath()), tearDownAt };
    },
  };
}
