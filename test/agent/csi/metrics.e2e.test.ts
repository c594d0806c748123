// CSI volumes end to end (harness.ts): csi_operations_seconds and kubelet_volume_stats_*
// from NodeGetVolumeStats.
import assert from 'node:assert/strict';
import { waitFor } from '../../helpers/daemon.ts';
import { uidOf } from '../../helpers/pods.ts';
import { claimPod, createClaim, csiCluster, csiTest, DRIVER, mounted } from './harness.ts';

csiTest(
  'metrics: csi_operations_seconds per call and kubelet_volume_stats_* from NodeGetVolumeStats',
  async (t) => {
    const c = await csiCluster(t, { driver: { capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS'] } });
    createClaim(c, 'stats');
    claimPod(c, 'web', 'stats');
    // A generic ephemeral volume: kubelet labels its stats with the pod-owned claim <pod>-<volume>.
    const gen = c.store.create('pods', {
      metadata: { name: 'gen', namespace: 'default' },
      spec: {
        nodeName: 'testnode',
        containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/s' }] }],
        volumes: [
          {
            name: 'data',
            ephemeral: {
              volumeClaimTemplate: {
                spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
              },
            },
          },
        ],
      },
      status: { phase: 'Running' },
    });
    const owned = c.store.create('persistentvolumeclaims', {
      metadata: {
        name: 'gen-data',
        namespace: 'default',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'gen', uid: uidOf(gen), controller: true }],
      },
      spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-gen-data' },
      status: { phase: 'Bound' },
    });
    c.store.create('persistentvolumes', {
      metadata: { name: 'pv-gen-data' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        claimRef: { namespace: 'default', name: 'gen-data', uid: owned.metadata?.uid },
        csi: { driver: DRIVER, volumeHandle: 'handle-gen-data' },
      },
    });
    // kubelet refreshes volume stats every --volume-stats-agg-period (not --sync-frequency, left at 1m).
    const p = await c.start(['--volume-stats-agg-period', '1s']);
    await mounted(p, 'web');
    await mounted(p, 'gen');
    const metric = async (re: RegExp) => re.exec((await p.get('/metrics')).body) ?? undefined;
    const cap = await waitFor('volume stats', () =>
      metric(
        /^kubelet_volume_stats_capacity_bytes\{namespace="default",persistentvolumeclaim="stats"\} (\d+)/m,
      ),
    );
    assert.ok(Number(cap[1]) > 0);
    assert.ok(
      await metric(
        /^kubelet_volume_stats_inodes_used\{namespace="default",persistentvolumeclaim="stats"\} \d+/m,
      ),
    );
    await waitFor('ephemeral claim stats', () =>
      metric(/^kubelet_volume_stats_used_bytes\{namespace="default",persistentvolumeclaim="gen-data"\} \d+/m),
    );
    // One NodePublishVolume per pod.
    assert.ok(
      await metric(
        new RegExp(
          `^csi_operations_seconds_count\\{driver_name="${DRIVER.replaceAll('.', '\\.')}",method_name="/csi\\.v1\\.Node/NodePublishVolume",grpc_status_code="OK",migrated="false"\\} 2$`,
          'm',
        ),
      ),
    );
    const stats = c.calls().find((x) => x.method === 'NodeGetVolumeStats' && x.code === 0);
    assert.ok(stats);
    // kubelet's request: the volume and the pod's target path, no staging path (proto default '').
    assert.equal(stats.request.staging_target_path, '');
    assert.match(String(stats.request.volume_path), /\/volumes\/kubernetes\.io~csi\/pv-[^/]+\/mount$/);
  },
);
