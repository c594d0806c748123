// kubelet's CSI nodeinfomanager (pkg/volume/csi/nodeinfomanager): after a CSI
// driver registers, its node ID goes into the node annotation
// csi.volume.kubernetes.io/nodeid (a JSON map driver → nodeID, read by
// external-attacher), its topology segments become node labels (an existing
// label with another value is a collision and fails the registration), and
// the CSINode object of this node (owned by the Node) gets an entry
// {name, nodeID, topologyKeys, allocatable.count} and the annotation
// storage.alpha.kubernetes.io/migrated-plugins. Uninstalling removes the
// entry and the annotation key, not the labels, as kubelet does.
import {
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  StorageV1Api,
  setHeaderOptions,
  type V1CSINode,
  type V1CSINodeDriver,
} from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { describeKubeError, kubeErrorCode } from '../../volumehost/kube/api-errors.ts';
import { goMarshalMap } from './gojson.ts';
import type { NodeInfoManager } from './registration.ts';
import { migratedPluginNames, migratedPluginsAnnotation } from './translation.ts';

export const nodeIDAnnotation = 'csi.volume.kubernetes.io/nodeid';

/** Optimistic-concurrency conflicts are retried this many times (kubelet: retry.RetryOnConflict). */
const conflictRetries = 5;

async function onConflictRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (kubeErrorCode(err) !== 409 || i >= conflictRetries) throw err;
    }
  }
}

export function createCSINodeInfoManager(kubeConfig: KubeConfig, nodeName: string): NodeInfoManager {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const storage = kubeConfig.makeApiClient(StorageV1Api);
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  /**
   * kubelet's setMigrationAnnotation, on the CSINode it creates and on every
   * driver install: the in-tree plugins whose volumes this node serves
   * through CSI (all it translates, whichever drivers registered, as kubelet
   * lists every migrated plugin), comma-joined and sorted.
   */
  const migratedPlugins = migratedPluginNames().join(',');

  /** Changes the node's nodeid annotation (and adds labels) with the node's resourceVersion as a precondition. */
  async function updateNode(
    change: (ids: Record<string, string>) => void,
    labels: Record<string, string> = {},
  ): Promise<void> {
    await onConflictRetry(async () => {
      const node = await core.readNode({ name: nodeName });
      const ids: Record<string, string> = {};
      const raw = node.metadata?.annotations?.[nodeIDAnnotation];
      if (raw) {
        try {
          Object.assign(ids, JSON.parse(raw));
        } catch (err) {
          throw new Error(`failed to parse node annotation "${nodeIDAnnotation}": ${errorMessage(err)}`);
        }
      }
      change(ids);
      for (const [k, v] of Object.entries(labels)) {
        const have = node.metadata?.labels?.[k];
        if (have !== undefined && have !== v) {
          throw new Error(
            `detected topology value collision: driver reported "${k}":"${v}" but existing label is "${k}":"${have}"`,
          );
        }
      }
      const annotation = Object.keys(ids).length > 0 ? goMarshalMap(ids) : null;
      if (
        annotation === (raw ?? null) &&
        Object.keys(labels).every((k) => node.metadata?.labels?.[k] !== undefined)
      )
        return;
      await core.patchNode(
        {
          name: nodeName,
          body: {
            metadata: {
              resourceVersion: node.metadata?.resourceVersion,
              annotations: { [nodeIDAnnotation]: annotation },
              ...(Object.keys(labels).length > 0 ? { labels } : {}),
            },
          },
        },
        mergePatch,
      );
    });
  }

  async function updateCSINode(change: (drivers: V1CSINodeDriver[]) => V1CSINodeDriver[]): Promise<void> {
    await onConflictRetry(async () => {
      let current: V1CSINode | undefined;
      try {
        current = await storage.readCSINode({ name: nodeName });
      } catch (err) {
        if (kubeErrorCode(err) !== 404) throw err;
      }
      if (!current) {
        const node = await core.readNode({ name: nodeName });
        const drivers = change([]);
        await storage.createCSINode({
          body: {
            apiVersion: 'storage.k8s.io/v1',
            kind: 'CSINode',
            metadata: {
              name: nodeName,
              annotations: { [migratedPluginsAnnotation]: migratedPlugins },
              ownerReferences: [
                { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata?.uid ?? '' },
              ],
            },
            spec: { drivers },
          },
        });
        return;
      }
      const drivers = change([...(current.spec?.drivers ?? [])]);
      const annotations = { ...current.metadata?.annotations, [migratedPluginsAnnotation]: migratedPlugins };
      await storage.replaceCSINode({
        name: nodeName,
        body: {
          ...current,
          metadata: { ...current.metadata, annotations },
          spec: { ...current.spec, drivers },
        },
      });
    });
  }

  return {
    async installCSIDriver(driverName, nodeID, maxVolumesPerNode, topology) {
      try {
        await updateNode((ids) => {
          ids[driverName] = nodeID;
        }, topology ?? {});
      } catch (err) {
        throw new Error(`error updating Node object with CSI driver node info: ${describeKubeError(err)}`);
      }
      const entry: V1CSINodeDriver = {
        name: driverName,
        nodeID,
        topologyKeys: Object.keys(topology ?? {}).sort(),
        ...(maxVolumesPerNode > 0 ? { allocatable: { count: maxVolumesPerNode } } : {}),
      };
      try {
        await updateCSINode((drivers) => [...drivers.filter((d) => d.name !== driverName), entry]);
      } catch (err) {
        throw new Error(`error updating CSINode object with CSI driver node info: ${describeKubeError(err)}`);
      }
    },
    async uninstallCSIDriver(driverName) {
      await updateCSINode((drivers) => drivers.filter((d) => d.name !== driverName));
      await updateNode((ids) => {
        delete ids[driverName];
      });
    },
  };
}
