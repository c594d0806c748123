// kubelet's csi_attacher.go on the node side: WaitForAttach (the
// VolumeAttachment the external-attacher made), and the device mounter:
// MountDevice = NodeStageVolume at globalmount, UnmountDevice =
// NodeUnstageVolume. The volume manager runs them as their own steps and
// operation (operation-generator.ts mountDevice/unmountDevice); the actual
// state knows which devices are staged, and reconstruction gets them back
// from the staging vol_data.json files after a restart (constructDeviceSpecs).
import { dirname, join } from 'node:path';
import type { StorageV1Api, V1CSIDriver, V1Pod } from '@kubernetes/client-node';
import { errorMessage, fieldOf } from '../../errno.ts';
import { type Spec, specName, VolumeError } from '../../volumehost/volume.ts';
import { type CSIContext, kubeClient } from './csi-context.ts';
import { checkBeforeDriver, pvSource, rpcError, type Source, volumeRequest } from './csi-util.ts';
import { WAIT_FOR_ATTACH_TIMEOUT_MS } from './timeouts.ts';
import {
  attachmentName,
  checkDriverName,
  loadVolumeData,
  mkdirAll,
  removeMountDir,
  saveVolumeData,
  stagingDataDir,
  stagingPath,
  uniqueVolumeName,
  volDataKey,
} from './vol-data.ts';

export interface CSIAttacher {
  /** WaitForAttach then MountDevice, for the pod whose mount operation stages the volume. */
  mountDevice(spec: Spec, pod: V1Pod): Promise<void>;
  /** UnmountDevice of the volume staged at `deviceMountPath` (its globalmount). */
  unmountDevice(deviceMountPath: string): Promise<void>;
  /** The staged volumes on disk, for reconstruction. */
  constructDeviceSpecs(): Promise<{ deviceName: string; deviceMountPath: string; spec: Spec }[]>;
  /** kubelet's getPublishContext, for SetUp: the attached VolumeAttachment's metadata ({} when none is needed). */
  publishContext(src: Source, driverObj: V1CSIDriver | undefined): Promise<Record<string, string>>;
  /** A pod volume's wait for attachment ends (its volume torn down). */
  endAttachWait(waitKey: string): void;
}

export function createCSIAttacher(ctx: CSIContext): CSIAttacher {
  /**
   * When each pod volume (<pod UID>/<volume>) first found its VolumeAttachment
   * not attached, on the context's clock. kubelet's WaitForAttach blocks one
   * mount operation for up to waitForAttachTimeout; podvol looks once per
   * retry instead, so the wait's start is kept across retries until it ends
   * (attached, failed or timed out).
   */
  const attachWaitSince = new Map<string, number>();
  const waitForAttachTimeoutMs = ctx.o.waitForAttachTimeoutMs ?? WAIT_FOR_ATTACH_TIMEOUT_MS;
  const needsAttach = (src: Source, driverObj: V1CSIDriver | undefined) =>
    driverObj?.spec?.attachRequired !== false && src.mode !== 'Ephemeral';

  function kubeConfigFor(src: Source) {
    const kc = ctx.host().getKubeConfig();
    if (!kc) {
      throw new VolumeError(
        'AttachRequired',
        `driver ${src.driver} requires attach (no CSIDriver says attachRequired: false) and podvol runs in standalone mode`,
      );
    }
    return kc;
  }

  /**
   * kubelet's VerifyControllerAttachedVolume and WaitForAttach: one look at
   * the node and the VolumeAttachment per retry, never a poll. As in kubelet,
   * nothing waiting here posts an Event (reason AttachPending) until the
   * VolumeAttachment has not been attached for the attach wait's timeout,
   * counted from the first look at it; then one `MountVolume.WaitForAttach
   * failed` Event (AttachTimedOut) and a new wait. An attach error or a
   * VolumeAttachment being deleted fails the wait at once, with an Event.
   */
  async function waitForAttach(
    src: Source,
    driverObj: V1CSIDriver | undefined,
    waitKey: string,
  ): Promise<Record<string, string>> {
    if (!needsAttach(src, driverObj)) return {};
    const kc = kubeConfigFor(src);
    const node = ctx.host().getNodeName();
    const unique = uniqueVolumeName(src.driver, src.handle);
    if (!ctx.o.volumesReportedInUse?.().has(unique)) {
      throw new VolumeError(
        'AttachPending',
        `volume ${unique} has not been added to the list of VolumesInUse in the node's volume status`,
      );
    }
    try {
      const n = await kc.makeApiClient((await kubeClient()).CoreV1Api).readNode({ name: node });
      if (!(n.status?.volumesAttached ?? []).some((v) => v.name === unique)) {
        throw new VolumeError(
          'AttachPending',
          `volume ${unique} has not yet been added to the list of VolumesAttached for node ${node}`,
        );
      }
    } catch (err) {
      if (err instanceof VolumeError) throw err;
      throw new VolumeError('AttachPending', `failed to read node ${node}: ${errorMessage(err)}`);
    }
    // From here on it is kubelet's WaitForAttach, with its timeout.
    const now = ctx.clock.now();
    const since = attachWaitSince.get(waitKey) ?? now;
    attachWaitSince.set(waitKey, since);
    const failWait = (message: string, eventMessage: string, cause?: unknown): never => {
      attachWaitSince.delete(waitKey);
      throw new VolumeError('AttachFailed', message, { cause, step: 'WaitForAttach', eventMessage });
    };
    const notYet = (message: string): never => {
      if (ctx.clock.now() - since < waitForAttachTimeoutMs) throw new VolumeError('AttachPending', message);
      attachWaitSince.delete(waitKey);
      // csi_attacher's waitForVolumeAttachDetachStatusWithLister, word for word.
      const timedOut = `timed out waiting for external-attacher of ${src.driver} CSI driver to attach volume ${src.handle}`;
      throw new VolumeError('AttachTimedOut', `${timedOut} (${message})`, {
        step: 'WaitForAttach',
        eventMessage: timedOut,
      });
    };
    const name = attachmentName(src.handle, src.driver, node);
    let va: Awaited<ReturnType<StorageV1Api['readVolumeAttachment']>>;
    try {
      va = await kc.makeApiClient((await kubeClient()).StorageV1Api).readVolumeAttachment({ name });
    } catch (err) {
      // kubelet's lister: not found yet is still waiting; any other error ends the wait.
      if (fieldOf(err, 'code') === 404) return notYet(`volume attachment ${name} does not exist yet`);
      return failWait(
        `volume attachment ${name} is not available: ${errorMessage(err)}`,
        errorMessage(err),
        err,
      );
    }
    if (va.metadata?.deletionTimestamp) {
      return failWait(`volume attachment ${name} is being deleted`, 'volume attachment is being deleted');
    }
    const attachErr = va.status?.attachError?.message;
    if (attachErr) return failWait(`attachment ${name} has error: ${attachErr}`, attachErr);
    if (!va.status?.attached) return notYet(`volume ${src.handle} is not attached yet (${name})`);
    attachWaitSince.delete(waitKey);
    return va.status.attachmentMetadata ?? {};
  }

  async function removeStagingDir(driver: string, handle: string): Promise<void> {
    const pluginDir = ctx.pluginDir();
    await removeMountDir(
      ctx.fs(),
      stagingDataDir(pluginDir, driver, handle),
      stagingPath(pluginDir, driver, handle),
    );
    ctx.index.removeStaged(driver, handle);
  }

  /**
   * kubelet's MountDevice: globalmount (0750) and the staging json first (with
   * seLinuxMountContext when mounted with one), even without STAGE_UNSTAGE
   * (UnmountDevice reads the json and removes both), then NodeStageVolume.
   * Every error is the MountDevice step's; on a final one what was made goes
   * (kubelet's deferred removeMountDir), on an uncertain one it stays, so
   * that the device is unstaged once nothing uses it.
   */
  async function stage(
    spec: Spec,
    pod: V1Pod,
    src: Source,
    driverObj: V1CSIDriver | undefined,
    pubCtx: Record<string, string>,
  ) {
    const client = ctx.clientFor(src.driver);
    const caps = await ctx.capabilities(client);
    const { capability, seLinuxData } = ctx.mountCapability(
      spec,
      pod,
      src,
      driverObj,
      caps,
      pod.spec?.securityContext?.fsGroup,
    );
    const fs = ctx.fs();
    const dataDir = stagingDataDir(ctx.pluginDir(), src.driver, src.handle);
    const globalmount = join(dataDir, 'globalmount');
    await mkdirAll(fs, globalmount, 0o750);
    await saveVolumeData(fs, dataDir, {
      [volDataKey.volHandle]: src.handle,
      [volDataKey.driverName]: src.driver,
      ...seLinuxData,
    });
    ctx.index.addStaged(src.driver, src.handle);
    if (!caps.has('STAGE_UNSTAGE_VOLUME')) return;
    const secrets = await ctx.secretData(src.stageSecretRef);
    try {
      await client.nodeStageVolume({
        ...volumeRequest(src, pubCtx, globalmount, capability),
        secrets,
        volume_context: src.attributes,
      });
    } catch (err) {
      throw rpcError('NodeStageVolume', err, 'MountDevice');
    }
  }

  return {
    async mountDevice(spec, pod) {
      await ctx.index.load();
      const inner = specName(spec);
      const phaseKey = `${pod.metadata?.uid ?? ''}/${inner}`;
      try {
        const { src, driverObj } = checkBeforeDriver(spec, pod, ctx.csiDriverObject);
        ctx.phases.set(phaseKey, 'attaching');
        const pubCtx = await waitForAttach(src, driverObj, phaseKey);
        ctx.phases.set(phaseKey, 'staging');
        try {
          await stage(spec, pod, src, driverObj, pubCtx);
        } catch (err) {
          const uncertain = err instanceof VolumeError && err.uncertain;
          if (!uncertain) await removeStagingDir(src.driver, src.handle).catch(() => {});
          if (err instanceof VolumeError && err.step !== undefined) throw err;
          throw new VolumeError(err instanceof VolumeError ? err.reason : 'MountFailed', errorMessage(err), {
            cause: err,
            step: 'MountDevice',
            uncertain,
          });
        }
      } finally {
        ctx.phases.delete(phaseKey);
      }
    },

    /**
     * kubelet's UnmountDevice: the staging json names the driver and handle;
     * NodeUnstageVolume when the driver stages, then globalmount, the json and
     * their directory go. No json: nothing is staged there (any more). A pod
     * directory whose vol_data.json still names the volume (one podvol did not
     * reconstruct: not its own, or failed) keeps it staged: podvol never
     * unstages under a publish it sees on disk.
     */
    async unmountDevice(deviceMountPath) {
      await ctx.index.load();
      const fs = ctx.fs();
      const dataDir = dirname(deviceMountPath);
      const data = await loadVolumeData(fs, dataDir);
      if (!data) {
        // Nothing staged by podvol; a mount there all the same is not forgotten (rmdir refuses it: EBUSY).
        await removeMountDir(fs, dataDir, deviceMountPath);
        return;
      }
      const driver = data[volDataKey.driverName] ?? '';
      const handle = data[volDataKey.volHandle] ?? '';
      checkDriverName(driver);
      const users = await ctx.index.users(driver, handle);
      if (users.length > 0) {
        throw new VolumeError(
          'StillMounted',
          `the device mount path ${deviceMountPath} is still used by ${users.map((u) => join(u, 'mount')).join(', ')}`,
        );
      }
      const client = ctx.clientFor(driver);
      const caps = await ctx.capabilities(client);
      if (caps.has('STAGE_UNSTAGE_VOLUME')) {
        try {
          await client.nodeUnstageVolume(handle, deviceMountPath);
        } catch (err) {
          throw rpcError('NodeUnstageVolume', err);
        }
      }
      await removeStagingDir(driver, handle);
    },

    async constructDeviceSpecs() {
      await ctx.index.load();
      return ctx.index.staged().map(({ driver, handle }) => ({
        deviceName: uniqueVolumeName(driver, handle),
        deviceMountPath: stagingPath(ctx.pluginDir(), driver, handle),
        spec: {
          persistentVolume: { metadata: { name: '' }, spec: { csi: { driver, volumeHandle: handle } } },
          readOnly: false,
        },
      }));
    },

    async publishContext(src, driverObj) {
      if (!needsAttach(src, driverObj)) return {};
      const kc = kubeConfigFor(src);
      const name = attachmentName(src.handle, src.driver, ctx.host().getNodeName());
      let va: Awaited<ReturnType<StorageV1Api['readVolumeAttachment']>>;
      try {
        va = await kc.makeApiClient((await kubeClient()).StorageV1Api).readVolumeAttachment({ name });
      } catch (err) {
        throw new VolumeError(
          'AttachPending',
          `failed to read volume attachment ${name}: ${errorMessage(err)}`,
        );
      }
      if (!va.status?.attached)
        throw new VolumeError('AttachPending', `volume ${src.handle} is not attached (${name})`);
      return va.status.attachmentMetadata ?? {};
    },

    endAttachWait(waitKey) {
      attachWaitSince.delete(waitKey);
    },
  };
}

/** kubelet's GetVolumeName for a spec the CSI plugin stages: a PersistentVolume's (an inline volume is never staged). */
export function deviceNameOf(spec: Spec): string | undefined {
  const pv = pvSource(spec);
  return pv ? uniqueVolumeName(pv.driver, pv.volumeHandle) : undefined;
}
