// A failed SetUp of a static pod is one warn line in podvol's log (op.failed's
// "MountVolume.SetUp failed"), not that and its Event's: without an API server
// Events are logged at debug, as kubelet logs them only at -v=3.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonDirs, startPodvol, volumeOf, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

mountTest('a failed SetUp of a static pod logs one warn line, its Event only at debug', async (t) => {
  const base = await tempDir(t);
  const { root, manifests } = await daemonDirs(base);
  await writeFile(
    join(manifests, 'bad.yaml'),
    `apiVersion: v1
kind: Pod
metadata: { name: bad, namespace: default }
spec:
  containers: [{ name: c, image: busybox, volumeMounts: [{ name: data, mountPath: /data }] }]
  volumes: [{ name: data, hostPath: { path: ${base}, type: File } }]
`,
  );
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  await waitFor('the SetUp to fail', async () => (await volumeOf(p, 'bad-testnode'))?.state === 'failed');
  await p.stop();
  const warnings = p.logLines().filter((l) => Number(l.level) >= 40 && l.pod === 'default/bad-testnode');
  assert.ok(warnings.length > 0, 'the failure is logged');
  assert.deepEqual(
    warnings.map((l) => l.msg),
    warnings.map(() => 'MountVolume.SetUp failed'),
    'one line per failed attempt, no Event line beside it',
  );
});
