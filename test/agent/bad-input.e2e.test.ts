// Every kind of bad input fails only the affected volume, with a precise
// reason in /status and the log; other volumes and pods keep working and
// nothing is written outside the pod's directory.
import assert from 'node:assert/strict';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonDirs, startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { must } from '../helpers/must.ts';
import { staticPod } from '../helpers/pods.ts';

mountTest('bad volumes get precise reasons; the rest of the pod and other pods work', async (t) => {
  const base = await tempDir(t);
  const { root, manifests } = await daemonDirs(base);
  const notADir = join(base, 'a-file');
  await writeFile(notADir, 'x');
  const created = join(base, 'created-by-refused-pod');
  // An invalid static pod is refused as a pod, as kubelet's ValidatePodCreate on a
  // decoded manifest refuses it: none of its volumes is set up, so its
  // DirectoryOrCreate hostPath is never created.
  const invalidVolumes = [
    { name: 'ok', emptyDir: {} },
    { name: 'orcreate', hostPath: { path: created, type: 'DirectoryOrCreate' } },
    { name: 'twosources', emptyDir: {}, hostPath: { path: '/tmp' } },
    { name: 'Bad_Name', emptyDir: {} },
    { name: 'dup', emptyDir: {} },
    { name: 'dup', emptyDir: { medium: 'Memory' } },
    { name: 'climb', hostPath: { path: `${base}/../etc` } },
    {
      name: 'abs',
      downwardAPI: { items: [{ path: '/etc/passwd', fieldRef: { fieldPath: 'metadata.name' } }] },
    },
    {
      name: 'dotdot',
      downwardAPI: { items: [{ path: '../../escape', fieldRef: { fieldPath: 'metadata.name' } }] },
    },
    { name: 'badfield', downwardAPI: { items: [{ path: 'x', fieldRef: { fieldPath: 'status.podIP' } }] } },
  ];
  // Volumes the API server admits but that fail on the node: only they fail.
  const volumes = [
    { name: 'ok', emptyDir: {} },
    // The API server defaults a volume without a source to emptyDir: {} (SetDefaults_Volume).
    { name: 'nosource' },
    { name: 'git', gitRepo: { repository: 'https://example.invalid/repo.git' } },
    { name: 'wrongtype', hostPath: { path: notADir, type: 'Directory' } },
    { name: 'ssd', emptyDir: { medium: 'SSD' } },
    { name: 'huge', emptyDir: { medium: 'HugePages-1Gi' } },
  ];
  const invalid = staticPod('invalid', invalidVolumes, ['missing']);
  const bad = staticPod('bad', volumes);
  const good = staticPod('good', [{ name: 'v', emptyDir: {} }]);
  await writeFile(
    join(manifests, 'pods.yaml'),
    `${JSON.stringify(invalid)}\n---\n${JSON.stringify(bad)}\n---\n${JSON.stringify(good)}\n---\nkind: Pod\nmetadata: {}\n---\n: : not yaml [\n`,
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
    git: 'UnknownVolumeSource',
    wrongtype: 'HostPathTypeMismatch',
    ssd: 'UnknownStorageMedium',
    huge: 'HugePagesNotRequested',
  };
  const volume = (name: string) => must(reasons[name], `volume ${name} in the status`);
  for (const [name, reason] of Object.entries(expect)) {
    assert.equal(volume(name).state, 'failed', `${name}: ${JSON.stringify(reasons[name])}`);
    assert.equal(volume(name).reason, reason, `${name}: ${volume(name).message}`);
    assert.ok(volume(name).message.length > 0);
  }
  assert.equal(volume('ok').state, 'mounted', 'a good volume of the same pod is mounted');
  assert.equal(volume('nosource').plugin, 'kubernetes.io/empty-dir');
  assert.match(volume('wrongtype').message, /is not a directory, it's a File/);
  assert.equal(
    volume('huge').message,
    'medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages',
  );

  const s = await p.status();
  assert.ok(s.pods.find((x) => x.name === 'good-testnode')?.volumes.every((v) => v.state === 'mounted'));
  assert.equal(
    s.pods.find((x) => x.name === 'invalid-testnode'),
    undefined,
    'the invalid pod is no pod at all',
  );
  // One entry for the file: its first error (the invalid pod), counting the NotAPod and the ParseError.
  assert.equal(s.errors.length, 1, JSON.stringify(s.errors));
  const refused = s.errors.find((e) => e.reason === 'InvalidPod');
  assert.equal(refused?.reason, 'InvalidPod');
  assert.equal(refused?.furtherErrors, 2);
  for (const field of [
    'spec.volumes[2]: Forbidden: may not specify more than 1 volume type',
    'spec.volumes[3].name: Invalid value: "Bad_Name"',
    'spec.volumes[5].name: Duplicate value: "dup"',
    `spec.volumes[6].hostPath.path: Invalid value: "${base}/../etc": must not contain '..'`,
    'spec.volumes[7].downwardAPI.items[0].path: Invalid value: "/etc/passwd": must be a relative path',
    'spec.volumes[8].downwardAPI.items[0].path: Invalid value: "../../escape": must not contain \'..\'',
    'Unsupported value: "status.podIP"',
    'spec.containers[0].volumeMounts[9].name: Not found: "missing"',
  ]) {
    assert.ok(refused?.message.includes(field), `${field} in ${refused?.message}`);
  }

  // Nothing outside the pod directories: the temp base holds only what the test made.
  // run/ holds the runtime socket the test helper gives the daemon.
  assert.deepEqual((await readdir(base)).sort(), ['a-file', 'manifests', 'root', 'run']);
  assert.deepEqual(
    (await readdir(root)).sort(),
    ['plugins_registry', 'pods', 'podvol'],
    'kubelet layout under pods/ (and the CSI registration directory), podvol records under podvol/',
  );
  await waitFor('failure logged', () =>
    p.logLines().some((l) => l.msg === 'MountVolume.SetUp failed' && l.reason === 'HostPathTypeMismatch'),
  );
  assert.equal(p.proc.exitCode, null, 'still running');
});
