// kubelet's CSI RegistrationHandler (csi_plugin.go): validates a driver the
// plugin watcher found, records it in the drivers store, asks it for its node
// info and publishes that (CSINode, node annotation, topology labels) through
// the NodeInfoManager. Any failure after the store was updated unregisters
// the driver again, as kubelet does.

import { errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { CSIClient } from './client.ts';
import { compareVersions, type DriversStore, highestSupportedVersion, parseVersion } from './drivers.ts';
import type { CSIProto } from './grpc.ts';
import { type CSIProtoSource, describeGrpcError } from './grpc-status.ts';

/** kubelet's nodeinfomanager: CSINode, the nodeid annotation and topology labels (cluster mode only). */
export interface NodeInfoManager {
  installCSIDriver(
    driverName: string,
    nodeID: string,
    maxVolumesPerNode: number,
    topology: Record<string, string> | undefined,
  ): Promise<void>;
  uninstallCSIDriver(driverName: string): Promise<void>;
}

export const noNodeInfo: NodeInfoManager = {
  async installCSIDriver() {},
  async uninstallCSIDriver() {},
};

export interface PluginHandler {
  validatePlugin(name: string, endpoint: string, versions: string[]): void;
  registerPlugin(
    name: string,
    endpoint: string,
    versions: string[],
    registrationSocket: string,
  ): Promise<void>;
  deRegisterPlugin(name: string, registrationSocket: string): Promise<void>;
}

export interface CSIRegistrationOptions {
  drivers: DriversStore;
  proto: CSIProto | CSIProtoSource;
  nodeInfo: NodeInfoManager;
  logger: Logger;
  /** Per-call deadline for GetPluginInfo/NodeGetInfo (kubelet: csiTimeout). */
  timeoutMs?: number;
}

export function csiRegistrationHandler(o: CSIRegistrationOptions): PluginHandler {
  const log = o.logger.child({ component: 'csi-registration' });
  return {
    validatePlugin(name, _endpoint, versions) {
      const incoming = highestSupportedVersion(versions);
      const existing = o.drivers.get(name);
      if (existing) {
        const have = parseVersion(existing.version) ?? [0, 0, 0];
        const want = parseVersion(incoming) ?? [0, 0, 0];
        if (compareVersions(have, want) >= 0) {
          throw new Error(
            `VALIDATION ERROR: Incoming CSI driver name ${name} (version ${incoming}) is already registered at version ${existing.version}`,
          );
        }
      }
    },

    async registerPlugin(name, endpoint, versions, registrationSocket) {
      const version = highestSupportedVersion(versions);
      o.drivers.set({ name, endpoint, version, registrationSocket });
      const client = new CSIClient(o.proto, endpoint, { timeoutMs: o.timeoutMs });
      try {
        let vendorVersion: string | undefined;
        try {
          const info = await client.getPluginInfo();
          vendorVersion = info.vendor_version;
          if (info.name !== name) {
            log.warn({ driver: name, pluginInfoName: info.name }, 'GetPluginInfo names a different driver');
          }
        } catch (err) {
          // kubelet does not call GetPluginInfo; a driver without it still registers.
          log.warn({ driver: name, err: describeGrpcError(err) }, 'GetPluginInfo failed');
        }
        let info: Awaited<ReturnType<CSIClient['nodeGetInfo']>>;
        try {
          info = await client.nodeGetInfo();
        } catch (err) {
          throw new Error(`error updating CSI node info: NodeGetInfo failed: ${describeGrpcError(err)}`);
        }
        const max = Number(info.max_volumes_per_node || 0);
        const topology = info.accessible_topology?.segments;
        await o.nodeInfo.installCSIDriver(name, info.node_id, max, topology);
        o.drivers.set({ name, endpoint, version, registrationSocket, nodeID: info.node_id, vendorVersion });
        log.info({ driver: name, endpoint, version, nodeID: info.node_id }, 'registered CSI driver');
      } catch (err) {
        if (o.drivers.get(name)?.registrationSocket === registrationSocket) o.drivers.delete(name);
        throw err;
      }
    },

    async deRegisterPlugin(name, registrationSocket) {
      const d = o.drivers.get(name);
      if (!d || d.registrationSocket !== registrationSocket) return;
      o.drivers.delete(name);
      log.info({ driver: name }, 'deregistered CSI driver');
      try {
        await o.nodeInfo.uninstallCSIDriver(name);
      } catch (err) {
        log.error({ driver: name, err: errorMessage(err) }, 'could not uninstall CSI driver from the node');
      }
    },
  };
}
