// `podvol plan`: the steps it prints for a pod, and proof that printing them
// changes nothing on the host (plan-vs-daemon.e2e.test.ts: the daemon then does exactly that).
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { failingVolumes, planManifest } from '../../../src/agent/ops/plan.ts';
import { stepLine } from '../../../src/agent/ops/plan-format.ts';
import { readMountInfo } from '../../../src/mount/mountinfo.ts';
import { kernelSupportsTmpfsNoswap } from '../../../src/mount/probe.ts';
import type { MountInfo } from '../../../src/mount/types.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { runCli } from './cli.ts';

// An explicit UID keeps the expected paths independent of the manifest's bytes.
const uid = 'demo-0000-uid';
const noswap = kernelSupportsTmpfsNoswap(release()) ? ',noswap' : '';

/** emptyDir Memory with a sizeLimit, downwardAPI, hostPath DirectoryOrCreate, an unused and a broken volume. */
function demoPod(hostPath: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'demo', uid, labels: { app: 'demo' } },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          resources: { limits: { memory: '128Mi' } },
          volumeMounts: ['fast', 'info', 'host', 'climb'].map((name) => ({ name, mountPath: `/${name}` })),
        },
      ],
      volumes: [
        { name: 'fast', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
        {
          name: 'info',
          downwardAPI: {
            items: [
              { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
              { path: 'meta/name', fieldRef: { fieldPath: 'metadata.name' }, mode: 0o400 },
            ],
          },
        },
        { name: 'host', hostPath: { path: hostPath, type: 'DirectoryOrCreate' } },
        { name: 'unused', emptyDir: {} },
        // Admitted (the API server does not check the medium), failing at SetUp as in kubelet.
        { name: 'climb', emptyDir: { medium: 'SSD' } },
      ],
    },
  });
}

function expectedText(root: string, hostPath: string): string {
  const pod = `${root}/pods/${uid}`;
  const fast = `${pod}/volumes/kubernetes.io~empty-dir/fast`;
  const info = `${pod}/volumes/kubernetes.io~downward-api/info`;
  const meta = `${pod}/plugins/kubernetes.io~empty-dir`;
  const rec = `${root}/podvol/pods/${uid}`;
  const record = (plugin: string, volume: string) => [
    `      write ${rec}/${plugin}/${volume}.json.tmp (mode 0600, N bytes)`,
    `      rename ${rec}/${plugin}/${volume}.json.tmp -> ${rec}/${plugin}/${volume}.json`,
  ];
  return `${[
    `podvol plan for node testnode, root directory ${root}`,
    'A dry run: nothing was changed. At run time, steps already done are skipped (set-up is idempotent).',
    `mkdir -m 0750 ${root}`,
    '',
    `pod default/demo-testnode (uid ${uid})`,
    '  set up:',
    '    volume fast:',
    `      mkdir -m 0750 ${root}/podvol`,
    `      mkdir -m 0750 ${root}/podvol/pods`,
    `      mkdir -m 0750 ${rec}`,
    `      mkdir -m 0750 ${root}/pods`,
    `      mkdir -m 0750 ${pod}`,
    `      mkdir -m 0750 ${pod}/volumes`,
    `      mkdir -m 0750 ${pod}/plugins`,
    `      mkdir -m 0750 ${rec}/kubernetes.io~empty-dir`,
    ...record('kubernetes.io~empty-dir', 'fast'),
    `      mkdir -m 0755 ${pod}/volumes/kubernetes.io~empty-dir`,
    `      mkdir -m 0755 ${fast}`,
    `      chmod 0777 ${fast}`,
    `      mount -t tmpfs -o size=67108864${noswap} tmpfs ${fast}`,
    `      mkdir -m 0750 ${meta}`,
    `      mkdir -m 0750 ${meta}/fast`,
    `      write ${meta}/fast/ready (mode 0644, 0 bytes)`,
    '    volume info:',
    `      mkdir -m 0750 ${rec}/kubernetes.io~downward-api`,
    ...record('kubernetes.io~downward-api', 'info'),
    `      mkdir -m 0755 ${pod}/volumes/kubernetes.io~downward-api`,
    `      mkdir -m 0755 ${info}`,
    `      chmod 0777 ${info}`,
    `      mount -t tmpfs -o size=134217728${noswap} tmpfs ${info}`,
    `      mkdir -m 0750 ${meta}/wrapped_info`,
    `      write ${meta}/wrapped_info/ready (mode 0644, 0 bytes)`,
    `      mkdir -m 0700 ${info}/..<timestamp>`,
    `      chmod 0755 ${info}/..<timestamp>`,
    `      write ${info}/..<timestamp>/labels (mode 0644, 10 bytes)`,
    `      mkdir -m 0755 ${info}/..<timestamp>/meta`,
    `      write ${info}/..<timestamp>/meta/name (mode 0400, 13 bytes)`,
    `      symlink ${info}/..data_tmp -> ..<timestamp>`,
    `      rename ${info}/..data_tmp -> ${info}/..data`,
    `      symlink ${info}/labels -> ..data/labels`,
    `      symlink ${info}/meta -> ..data/meta`,
    '    volume host:',
    `      mkdir -m 0750 ${rec}/kubernetes.io~host-path`,
    ...record('kubernetes.io~host-path', 'host'),
    `      mkdir -m 0755 ${hostPath}`,
    '    ignore volume unused: no container mounts it, so it is not set up (as in kubelet)',
    // The daemon writes the record before SetUp fails, and keeps it to tear the volume down.
    '    volume climb:',
    ...record('kubernetes.io~empty-dir', 'climb'),
    '    skip volume climb: UnknownStorageMedium: unknown storage medium "SSD"',
    '  tear down, when the pod goes away (the pod directory once no mount is left below it):',
    '    volume fast:',
    `      rm -r ${meta}/fast`,
    `      umount ${fast}`,
    `      rm -r ${fast}`,
    `      rm -r ${rec}/kubernetes.io~empty-dir/fast.json`,
    '    volume info:',
    `      rm -r ${meta}/wrapped_info`,
    `      umount ${info}`,
    `      rm -r ${info}`,
    `      rm -r ${rec}/kubernetes.io~downward-api/info.json`,
    '    volume host:',
    `      rm -r ${rec}/kubernetes.io~host-path/host.json`,
    '    volume climb:',
    `      rm -r ${rec}/kubernetes.io~empty-dir/climb.json`,
    `    rm -r ${pod}`,
    `    rm -r ${rec}`,
  ].join('\n')}\n`;
}

// Record sizes depend on the temp dir's name; the end-to-end test below checks them against the daemon.
const anyRecordSize = (s: string) => s.replace(/(\.json\.tmp \(mode 0600, )\d+( bytes\))/g, '$1N$2');

async function demoSetup(t: import('node:test').TestContext) {
  const base = await tempDir(t);
  const root = join(base, 'root');
  const hostParent = join(base, 'host');
  const hostPath = join(hostParent, 'new');
  const manifests = join(base, 'manifests');
  await mkdir(manifests);
  await mkdir(hostParent);
  const manifest = join(manifests, 'demo.json');
  await writeFile(manifest, demoPod(hostPath));
  return { base, root, hostParent, hostPath, manifests, manifest };
}

/** The demo pod's broken volume, as plan names it on stderr. */
const climbFails =
  'podvol plan: default/demo-testnode volume climb would fail: UnknownStorageMedium: unknown storage medium "SSD"\n';

const planArgs = (manifest: string, root: string, ...extra: string[]) => [
  'plan',
  '-f',
  manifest,
  '--root-dir',
  root,
  '--node-name',
  'testnode',
  ...extra,
];

test('plan prints every directory, mount and file of set-up, then tear-down, in order', async (t) => {
  const { root, hostPath, manifest } = await demoSetup(t);
  const r = await runCli(planArgs(manifest, root));
  // The broken hostPath volume would fail: named on stderr, and exit code 1.
  assert.equal(r.stderr, climbFails);
  assert.equal(r.code, 1);
  assert.equal(anyRecordSize(r.stdout), expectedText(root, hostPath));
});

test('plan exits 0 when every volume would be set up', async (t) => {
  const { root, manifests, hostPath } = await demoSetup(t);
  const file = join(manifests, 'demo.json');
  const pod = JSON.parse(demoPod(hostPath));
  pod.spec.volumes = pod.spec.volumes.filter((v: { name: string }) => v.name !== 'climb');
  pod.spec.containers[0].volumeMounts = pod.spec.containers[0].volumeMounts.filter(
    (m: { name: string }) => m.name !== 'climb',
  );
  await writeFile(file, JSON.stringify(pod));
  const r = await runCli(planArgs(file, root));
  assert.equal(r.stderr, '');
  assert.equal(r.code, 0);
  assert.doesNotMatch(r.stdout, /skip volume/);
});

test('plan -f DIR plans every manifest of a directory as --pod-manifest-path reads it', async (t) => {
  const { root, hostPath, manifests } = await demoSetup(t);
  await writeFile(join(manifests, '.hidden.yaml'), 'not: [a pod');
  await writeFile(
    join(manifests, 'other.yaml'),
    'apiVersion: v1\nkind: Pod\nmetadata: {name: other}\nspec:\n  containers: [{name: c, image: x, volumeMounts: [{name: scratch, mountPath: /s}]}]\n  volumes: [{name: scratch, emptyDir: {}}]\n',
  );
  const r = await runCli(planArgs(manifests, root));
  assert.equal(r.stderr, climbFails);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /^pod default\/demo-testnode \(uid /m);
  assert.match(r.stdout, /^pod default\/other-testnode \(uid /m);
  assert.match(r.stdout, /volume scratch:/);
  // The demo pod's section is exactly the one a plan of its file alone prints.
  const [, demoSection = '<no demo section>'] = expectedText(root, hostPath).split('\n\n');
  assert.ok(anyRecordSize(r.stdout).includes(demoSection));
});

test('plan on empty input (an empty file, -f - with nothing, an empty directory) says so on stderr and exits 1', async (t) => {
  const dir = await tempDir(t);
  const root = join(dir, 'root');
  const empty = join(dir, 'empty.yaml');
  await writeFile(empty, '');
  await mkdir(join(dir, 'manifests'));
  const emptyManifest =
    'EmptyManifest: manifest holds no document (it is empty, or only comments): no pod is read from it';
  const cases: [string, string, string][] = [
    [empty, '', `podvol plan: ${empty}: ${emptyManifest}\npodvol plan: no pod to plan in ${empty}\n`],
    ['-', '', `podvol plan: -: ${emptyManifest}\npodvol plan: no pod to plan in stdin\n`],
    [join(dir, 'manifests'), '', `podvol plan: no pod to plan in ${join(dir, 'manifests')}\n`],
  ];
  for (const [file, stdin, stderr] of cases) {
    const r = await runCli(planArgs(file, root), {}, stdin);
    assert.equal(r.code, 1, file);
    assert.equal(r.stdout, '', file);
    assert.equal(r.stderr, stderr, file);
  }
});

test('plan -o json lists the same steps as {phase, pod, volume, action, path, detail}', async (t) => {
  const { root, hostPath, manifest } = await demoSetup(t);
  const r = await runCli(planArgs(manifest, root, '-o', 'json'));
  assert.equal(r.code, 1);
  const steps = JSON.parse(r.stdout) as Record<string, string>[];
  assert.deepEqual(steps[0], {
    phase: 'setup',
    pod: '',
    volume: '',
    action: 'mkdir',
    path: root,
    detail: '0750',
  });
  const fast = `${root}/pods/${uid}/volumes/kubernetes.io~empty-dir/fast`;
  assert.deepEqual(
    steps.find((s) => s.action === 'mount'),
    {
      phase: 'setup',
      pod: 'default/demo-testnode',
      volume: 'fast',
      action: 'mount',
      path: fast,
      detail: `-t tmpfs -o size=67108864${noswap} tmpfs`,
    },
  );
  assert.deepEqual(
    steps.filter((s) => s.volume === 'host' && s.phase === 'setup').map((s) => [s.action, s.path]),
    [
      ['mkdir', `${root}/podvol/pods/${uid}/kubernetes.io~host-path`],
      ['write', `${root}/podvol/pods/${uid}/kubernetes.io~host-path/host.json.tmp`],
      ['rename', `${root}/podvol/pods/${uid}/kubernetes.io~host-path/host.json.tmp`],
      ['mkdir', hostPath],
    ],
  );
  assert.deepEqual(
    steps.filter((s) => s.phase === 'teardown' && s.action === 'umount').map((s) => s.volume),
    ['fast', 'info'],
  );
  // The text output is these steps, one line each.
  const text = anyRecordSize((await runCli(planArgs(manifest, root))).stdout);
  for (const s of steps) assert.ok(text.includes(anyRecordSize(stepLine(s as never))), stepLine(s as never));
});

test('plan reports manifest documents that are not pods on stderr and exits 1, still planning the rest', async (t) => {
  const { root, hostPath, manifests } = await demoSetup(t);
  const file = join(manifests, 'mixed.yaml');
  await writeFile(
    file,
    `${demoPod(hostPath)}\n---\nkind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\n`,
  );
  const r = await runCli(planArgs(file, root));
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    `podvol plan: ${file} document 2: NotAPod: kind "Deployment": only apiVersion "v1", kind "Pod" documents are static pods\n${climbFails}`,
  );
  assert.equal(anyRecordSize(r.stdout), expectedText(root, hostPath));
});

test('plan reads the manifest from stdin with -f -', async (t) => {
  const { root, hostPath } = await demoSetup(t);
  const r = await runCli(
    ['plan', '-f', '-', '--node-name', 'testnode'],
    { PODVOL_ROOT_DIR: root },
    demoPod(hostPath),
  );
  assert.equal(r.stderr, climbFails);
  assert.equal(r.code, 1);
  assert.equal(anyRecordSize(r.stdout), expectedText(root, hostPath));
});

test('plan: an unreadable manifest is exit code 1, a missing -f or a bad -o exit code 2', async (t) => {
  const base = await tempDir(t);
  const missing = await runCli(['plan', '-f', join(base, 'nope.yaml')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^podvol plan: cannot read .*nope\.yaml: ENOENT/);
  assert.equal((await runCli(['plan'])).code, 2);
  const badOutput = await runCli(['plan', '-f', join(base, 'x'), '-o', 'yaml']);
  assert.equal(badOutput.code, 2);
  assert.match(badOutput.stderr, /Allowed choices are text, json/);
});

// The API-backed plugins and fsGroup, planned in-process (no API server needed: nothing is fetched).
test('plan names what must be fetched from the API server and where its files go', async () => {
  const manifest = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'api', namespace: 'shop' },
    spec: {
      securityContext: { fsGroup: 2000 },
      serviceAccountName: 'web',
      containers: [
        {
          name: 'app',
          image: 'busybox',
          resources: { limits: { memory: '1Gi' } },
          volumeMounts: ['cfg', 'creds', 'bundle', 'huge'].map((name) => ({ name, mountPath: `/${name}` })),
        },
      ],
      volumes: [
        { name: 'cfg', configMap: { name: 'settings' } },
        {
          name: 'creds',
          secret: { secretName: 'db', items: [{ key: 'password', path: 'db/password' }], optional: true },
        },
        {
          name: 'bundle',
          projected: {
            sources: [
              { serviceAccountToken: { path: 'token', audience: 'vault' } },
              { downwardAPI: { items: [{ path: 'ns', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
            ],
          },
        },
        { name: 'huge', emptyDir: { medium: 'HugePages' } },
      ],
    },
  };
  const base = await mkdtemp(join(tmpdir(), 'podvol-plan-'));
  const root = join(base, 'r');
  const plan = await planManifest(JSON.stringify(manifest), 'api.json', {
    rootDir: root,
    nodeName: 'n',
    allocatable: { memory: '8Gi' },
  });
  await rm(base, { recursive: true });
  const lines = (volume: string) =>
    plan.steps.filter((s) => s.volume === volume && s.phase === 'setup').map(stepLine);
  const podUID = plan.pods[0]?.uid;
  assert.ok(podUID, 'the pod is planned');
  const cfg = `${root}/pods/${podUID}/volumes/kubernetes.io~configmap/cfg`;
  const ts = `${cfg}/..<timestamp>`;
  // Without items, the configMap's keys are known only once it is fetched: one placeholder stands for them.
  const cfgLines = lines('cfg');
  assert.deepEqual(cfgLines.slice(cfgLines.indexOf('fetch configMap shop/settings (needs the API server)')), [
    'fetch configMap shop/settings (needs the API server)',
    `mkdir -m 0755 ${root}/pods/${podUID}/volumes/kubernetes.io~configmap`,
    `mkdir -m 0755 ${cfg}`,
    `chmod 0777 ${cfg}`,
    // fsGroup on the wrapper emptyDir: group read-write and setgid.
    `chown ${cfg} (group 2000)`,
    `chmod 02777 ${cfg}`,
    `mkdir -m 0750 ${root}/pods/${podUID}/plugins/kubernetes.io~empty-dir`,
    `mkdir -m 0750 ${root}/pods/${podUID}/plugins/kubernetes.io~empty-dir/wrapped_cfg`,
    `write ${root}/pods/${podUID}/plugins/kubernetes.io~empty-dir/wrapped_cfg/ready (mode 0644, 0 bytes)`,
    // Inside the setgid volume a new directory is setgid and of the group too (Linux), until its chmod.
    `mkdir -m 02700 ${ts}`,
    `chmod 0755 ${ts}`,
    `write ${ts}/<key> (mode 0644, key "<key>" of configMap shop/settings)`,
    // Then on the files, read-only to containers: group read only.
    `chown ${ts}/<key> (group 2000)`,
    `chmod 0644 ${ts}/<key>`,
    `chown ${ts} (group 2000)`,
    `chmod 02755 ${ts}`,
    `chown ${cfg} (group 2000)`,
    `chmod 02777 ${cfg}`,
    `symlink ${cfg}/..data_tmp -> ..<timestamp>`,
    `rename ${cfg}/..data_tmp -> ${cfg}/..data`,
    `symlink ${cfg}/<key> -> ..data/<key>`,
  ]);
  const creds = `${root}/pods/${podUID}/volumes/kubernetes.io~secret/creds`;
  assert.ok(lines('creds').includes('fetch secret shop/db (needs the API server)'));
  assert.ok(lines('creds').includes(`mount -t tmpfs -o size=1073741824${noswap} tmpfs ${creds}`));
  assert.ok(
    lines('creds').includes(
      `write ${creds}/..<timestamp>/db/password (mode 0644, key "password" of secret shop/db)`,
    ),
  );
  const bundle = `${root}/pods/${podUID}/volumes/kubernetes.io~projected/bundle`;
  assert.ok(
    lines('bundle').includes(
      'fetch serviceAccountToken of shop/web (audience "vault", expirationSeconds 3600; needs the API server)',
    ),
  );
  // With an fsGroup the token is written 0600; SetVolumeOwnership then opens it to the group.
  assert.ok(
    lines('bundle').includes(`write ${bundle}/..<timestamp>/token (mode 0600, the token of shop/web)`),
  );
  assert.ok(lines('bundle').includes(`chmod 0640 ${bundle}/..<timestamp>/token`));
  assert.ok(lines('bundle').includes(`write ${bundle}/..<timestamp>/ns (mode 0644, 4 bytes)`));
  // A failing SetUp ends in a skip line; what it did before stays listed (the daemon leaves it too).
  assert.equal(
    lines('huge').at(-1),
    'skip volume huge: HugePagesNotRequested: medium HugePages: hugePages storage requested, but there is no resource request for huge pages',
  );
  assert.ok(!lines('huge').some((l) => l.startsWith('mount')));
  assert.deepEqual(
    failingVolumes(plan).map((s) => s.volume),
    ['huge'],
  );
});

/** Every entry below dir with its type, mode, size, times and link target: any change shows. */
async function listing(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (p: string) => {
    const st = await lstat(p);
    const link = st.isSymbolicLink() ? ` -> ${await readlink(p)}` : '';
    out.push(`${p} ${st.mode.toString(8)} ${st.size} ${st.mtimeMs} ${st.ctimeMs}${link}`);
    if (st.isDirectory()) for (const e of (await readdir(p)).sort()) await walk(join(p, e));
  };
  await walk(dir);
  return out;
}

/**
 * The mount table as this test can judge it: other test files run at the same
 * time in the same namespace and mount below their own podvol-test-* dirs.
 */
// Tests run two at a time in one mount namespace: mounts of other tests' temp
// directories come and go meanwhile, so only this test's and the host's count.
async function mountTableExceptOtherTests(base: string): Promise<MountInfo[]> {
  const tmp = `${tmpdir()}/`;
  return (await readMountInfo()).filter((m) => {
    const paths = [m.root, m.mountPoint, m.source];
    return !paths.some((p) => p.includes(tmp)) || paths.some((p) => p.includes(base));
  });
}

mountTest(
  'plan changes nothing: mount table, root directory and hostPath parent are identical after it',
  async (t) => {
    const { base, root, hostParent, hostPath, manifest } = await demoSetup(t);
    // A root directory that already holds a pod, so there is something to disturb.
    await mkdir(join(root, 'pods', uid, 'volumes'), { recursive: true });
    const before = {
      mounts: await mountTableExceptOtherTests(base),
      root: await listing(root),
      host: await listing(hostParent),
      base: await listing(base),
    };
    for (const output of ['text', 'json']) {
      const r = await runCli(planArgs(manifest, root, '-o', output));
      assert.equal(r.stderr, climbFails);
      assert.match(r.stdout, output === 'text' ? /mount -t tmpfs/ : /"action": "mount"/);
    }
    assert.deepEqual(await mountTableExceptOtherTests(base), before.mounts);
    assert.deepEqual(await listing(root), before.root);
    assert.deepEqual(await listing(hostParent), before.host);
    assert.deepEqual(await listing(base), before.base);
    await assert.rejects(stat(hostPath), { code: 'ENOENT' });
  },
);

// That the daemon then makes exactly what the plan says: plan-vs-daemon.e2e.test.ts.

test('plan shows nested mount points, and refuses a mountPath of .. as SetUp does', async () => {
  const manifest = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'nest', namespace: 'default' },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: [
            { name: 'info', mountPath: '/etc/app' },
            { name: 'tls', mountPath: '/etc/app/tls' },
            { name: 'climb', mountPath: '..' },
            { name: 'x', mountPath: '../../../x' },
          ],
        },
      ],
      volumes: ['info', 'climb'].map((name) => ({
        name,
        downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] },
      })),
    },
  };
  manifest.spec.volumes.push({ name: 'tls', emptyDir: {} } as never, { name: 'x', emptyDir: {} } as never);
  const plan = await planManifest(JSON.stringify(manifest), 'nest.json', {
    rootDir: '/nonexistent/r',
    nodeName: 'n',
    allocatable: { memory: '8Gi' },
  });
  const podUID = plan.pods[0]?.uid;
  assert.ok(podUID, 'the pod is planned');
  const setup = (volume: string) =>
    plan.steps.filter((s) => s.volume === volume && s.phase === 'setup').map(stepLine);
  const info = `/nonexistent/r/pods/${podUID}/volumes/kubernetes.io~downward-api/info`;
  assert.ok(setup('info').includes(`mkdir -m 0755 ${info}/tls`), setup('info').join('\n'));
  const climb = setup('climb');
  assert.match(climb.at(-1) ?? '', /InvalidPath: invalid container mount point \.\./);
  // SetUp refused it before writing anything into the volume (and rolled its first set-up back).
  assert.ok(!climb.some((l) => l.startsWith('write') && l.includes('/volumes/')), climb.join('\n'));
});
