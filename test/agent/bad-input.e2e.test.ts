// Every kind of bad input fails only the affected volume, with a precise
// reason in /status and the log; other volumes and pods keep working and
// nothing is written outside the pod's directory.
import assert from 'node:assert/strict';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

mountTest('bad volumes get precise reasons; the rest of the pod and other pods work', async (t) => {
  const base = await tempDir(t);
  const root = join(base, 'root');
  const manifests = join(base, 'manifests');
  await mkdir(manifests);
  const notADir = join(base, 'a-file');
  await writeFile(notADir, 'x');
  const volumes = [
    { name: 'ok', emptyDir: {} },
    // The API server defaults a volume without a source to emptyDir: {} (SetDefaults_Volume).
    { name: 'nosource' },
    { name: 'twosources', emptyDir: {}, hostPath: { path: '/tmp' } },
    { name: 'git', gitRepo: { repository: 'https://example.invalid/repo.git' } },
    { name: 'Bad_Name', emptyDir: {} },
    { name: 'dup', emptyDir: {} },
    { name: 'dup', emptyDir: { medium: 'Memory' } },
    { name: 'wrongtype', hostPath: { path: notADir, type: 'Directory' } },
    { name: 'climb', hostPath: { path: `${base}/../etc` } },
    {
      name: 'abs',
      downwardAPI: { items: [{ path: '/etc/passwd', fieldRef: { fieldPath: 'metadata.name' } }] },
    },
    {
      name: 'dotdot',
      downwardAPI: { items: [{ path: '../../escape', fieldRef: { fieldPath: 'metadata.name' } }] },
    },
    { name: 'huge', emptyDir: { medium: 'Memory', sizeLimit: '1000000000Ei' } },
    { name: 'badfield', downwardAPI: { items: [{ path: 'x', fieldRef: { fieldPath: 'status.podIP' } }] } },
  ];
  const mounts = [...new Set(volumes.map((v) => v.name)), 'missing'].map((name) => ({
    name,
    mountPath: `/m/${name}`,
  }));
  const bad = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'bad' },
    spec: { containers: [{ name: 'c', image: 'i', volumeMounts: mounts }], volumes },
  };
  const good = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'good' },
    spec: {
      containers: [{ name: 'c', image: 'i', volumeMounts: [{ name: 'v', mountPath: '/v' }] }],
      volumes: [{ name: 'v', emptyDir: {} }],
    },
  };
  await writeFile(
    join(manifests, 'pods.yaml'),
    `${JSON.stringify(bad)}\n---\n${JSON.stringify(good)}\n---\nkind: Pod\nmetadata: {}\n---\n: : not yaml [\n`,
  );

  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  const reasons = await waitFor('bad pod settled', async () => {
    const s = await p.status();
    const podStatus = s.pods.find((x) => x.name === 'bad-testnode');
    if (!podStatus || podStatus.volumes.some((v) => v.state === 'pending')) return undefined;
    return Object.fromEntries(podStatus.volumes.map((v) => [v.name, v]));
  });
  const expect: Record<string, string> = {
    twosources: 'UnknownVolumeSource',
    git: 'UnknownVolumeSource',
    Bad_Name: 'InvalidVolumeName',
    dup: 'DuplicateVolumeName',
    missing: 'VolumeNotFound',
    wrongtype: 'HostPathTypeMismatch',
    climb: 'InvalidPath',
    abs: 'InvalidPath',
    dotdot: 'InvalidPath',
    huge: 'InvalidSizeLimit',
  };
  for (const [name, reason] of Object.entries(expect)) {
    assert.equal(reasons[name]?.state, 'failed', `${name}: ${JSON.stringify(reasons[name])}`);
    assert.equal(reasons[name].reason, reason, `${name}: ${reasons[name].message}`);
    assert.ok(reasons[name].message.length > 0);
  }
  assert.equal(reasons.badfield.state, 'failed');
  assert.match(reasons.badfield.message, /Unsupported value: "status.podIP"/);
  assert.equal(reasons.ok.state, 'mounted', 'a good volume of the same pod is mounted');
  assert.equal(reasons.nosource.plugin, 'kubernetes.io/empty-dir');
  assert.match(reasons.wrongtype.message, /is not a directory, it's a File/);

  const s = await p.status();
  assert.ok(s.pods.find((x) => x.name === 'good-testnode')?.volumes.every((v) => v.state === 'mounted'));
  assert.equal(s.errors.length, 2, JSON.stringify(s.errors));

  // Nothing outside the pod directories: the temp base holds only what the test made.
  assert.deepEqual((await readdir(base)).sort(), ['a-file', 'manifests', 'root']);
  assert.deepEqual(
    (await readdir(root)).sort(),
    ['pods', 'podvol'],
    'kubelet layout under pods/, podvol records under podvol/',
  );
  assert.ok(
    p.logLines().some((l) => l.msg === 'MountVolume.SetUp failed' && l.reason === 'HostPathTypeMismatch'),
  );
  assert.equal(p.proc.exitCode, null, 'still running');
});
