// `podvol plan`: the steps it prints for a pod, and proof that printing them
// changes nothing on the host while the daemon then does exactly that.
import assert from 'node:assert/strict';
import { lstat, mkdir, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { planManifest } from '../../../src/agent/ops/plan.ts';
import { stepLine } from '../../../src/agent/ops/plan-format.ts';
import { createPlanContext } from '../../../src/agent/ops/plan-host.ts';
import { kernelSupportsTmpfsNoswap } from '../../../src/mount/probe.ts';
import { mountsBelow, startPodvol, waitFor } from '../../helpers/daemon.ts';
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
  return `podvol plan for node testnode, root directory ${root}
A dry run: nothing was changed. At run time, steps already done are skipped (set-up is idempotent).
mkdir -p -m 0750 ${root}

pod default/demo-testnode (uid ${uid})
  set up:
    volume fast:
      mkdir -p -m 0750 ${pod}/volumes
      mkdir -p -m 0750 ${pod}/plugins
      mkdir -p -m 0750 ${rec}/kubernetes.io~empty-dir
      write ${rec}/kubernetes.io~empty-dir/fast.json (mode 0600, N bytes)
      mkdir -p -m 0777 ${fast}
      mount -t tmpfs -o size=67108864${noswap} tmpfs ${fast}
      mkdir -p -m 0750 ${meta}/fast
      write ${meta}/fast/ready (mode 0644, 0 bytes)
    volume info:
      mkdir -p -m 0750 ${rec}/kubernetes.io~downward-api
      write ${rec}/kubernetes.io~downward-api/info.json (mode 0600, N bytes)
      mkdir -p -m 0777 ${info}
      mount -t tmpfs -o size=134217728${noswap} tmpfs ${info}
      mkdir -p -m 0750 ${meta}/wrapped_info
      write ${meta}/wrapped_info/ready (mode 0644, 0 bytes)
      mkdir -p -m 0755 ${info}/..<timestamp>
      write ${info}/..<timestamp>/labels (mode 0644, 10 bytes)
      mkdir -p -m 0777 ${info}/..<timestamp>/meta
      write ${info}/..<timestamp>/meta/name (mode 0400, 13 bytes)
      symlink ${info}/..data_tmp -> ..<timestamp>
      rename ${info}/..data_tmp -> ${info}/..data
      symlink ${info}/labels -> ..data/labels
      symlink ${info}/meta -> ..data/meta
    volume host:
      mkdir -p -m 0750 ${rec}/kubernetes.io~host-path
      write ${rec}/kubernetes.io~host-path/host.json (mode 0600, N bytes)
      check hostPath ${hostPath} is a Directory (DirectoryOrCreate: missing now, so it is created)
      mkdir -p -m 0755 ${hostPath}
    ignore volume unused: no container mounts it, so it is not set up (as in kubelet)
    skip volume climb: UnknownStorageMedium: unknown storage medium "SSD"
  tear down, when the pod goes away (the pod directory once no mount is left below it):
    volume fast:
      rm -r ${meta}/fast
      umount ${fast}
      rm -r ${fast}
      rm -r ${rec}/kubernetes.io~empty-dir/fast.json
    volume info:
      rm -r ${meta}/wrapped_info
      umount ${info}
      rm -r ${info}
      rm -r ${rec}/kubernetes.io~downward-api/info.json
    volume host:
      rm -r ${rec}/kubernetes.io~host-path/host.json
    rm -r ${pod}
    rm -r ${rec}
`;
}

// Record sizes depend on the temp dir's name; the end-to-end test below checks them against the daemon.
const anyRecordSize = (s: string) => s.replace(/(\.json \(mode 0600, )\d+( bytes\))/g, '$1N$2');

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
  assert.ok(anyRecordSize(r.stdout).includes(expectedText(root, hostPath).split('\n\n')[1]));
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
      ['write', `${root}/podvol/pods/${uid}/kubernetes.io~host-path/host.json`],
      ['check', hostPath],
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
test('plan names what must be fetched from the API server and where its files go', () => {
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
  const ctx = createPlanContext({
    rootDir: '/r',
    nodeName: 'n',
    allocatable: { memory: '8Gi' },
    noswap: false,
  });
  const plan = planManifest(JSON.stringify(manifest), 'api.json', ctx);
  const lines = (volume: string) =>
    plan.steps.filter((s) => s.volume === volume && s.phase === 'setup').map(stepLine);
  const podUID = plan.pods[0].uid;
  const cfg = `/r/pods/${podUID}/volumes/kubernetes.io~configmap/cfg`;
  // The first four lines are the pod's directories and the volume's record.
  assert.deepEqual(lines('cfg').slice(4), [
    'fetch configMap shop/settings (needs the API server)',
    `mkdir -p -m 0777 ${cfg}`,
    `chown ${cfg} (recursively: group 2000, group read-write, setgid on directories (fsGroup))`,
    `mkdir -p -m 0750 /r/pods/${podUID}/plugins/kubernetes.io~empty-dir/wrapped_cfg`,
    `write /r/pods/${podUID}/plugins/kubernetes.io~empty-dir/wrapped_cfg/ready (mode 0644, 0 bytes)`,
    `mkdir -p -m 0755 ${cfg}/..<timestamp>`,
    `write ${cfg}/..<timestamp>/<key> (mode 0644, one file per key of configMap shop/settings)`,
    `chown ${cfg} (recursively: group 2000, group read, setgid on directories (fsGroup))`,
    `symlink ${cfg}/..data_tmp -> ..<timestamp>`,
    `rename ${cfg}/..data_tmp -> ${cfg}/..data`,
    `symlink ${cfg}/<key> -> ..data/<key>`,
  ]);
  const creds = `/r/pods/${podUID}/volumes/kubernetes.io~secret/creds`;
  assert.ok(
    lines('creds').includes(
      'fetch secret shop/db (needs the API server; optional: a missing one counts as empty)',
    ),
  );
  assert.ok(lines('creds').includes(`mount -t tmpfs -o size=1073741824 tmpfs ${creds}`));
  assert.ok(
    lines('creds').includes(
      `write ${creds}/..<timestamp>/db/password (mode 0644, key "password" of secret shop/db, left out if missing)`,
    ),
  );
  const bundle = `/r/pods/${podUID}/volumes/kubernetes.io~projected/bundle`;
  assert.ok(
    lines('bundle').includes(
      'fetch serviceAccountToken of shop/web (audience "vault", expirationSeconds 3600; needs the API server)',
    ),
  );
  // With an fsGroup the token is written 0600; SetVolumeOwnership then opens it to the group.
  assert.ok(lines('bundle').includes(`write ${bundle}/..<timestamp>/token (mode 0600, the token)`));
  assert.ok(lines('bundle').includes(`write ${bundle}/..<timestamp>/ns (mode 0644, 4 bytes)`));
  // A failing SetUp is one skip line and no half plan.
  assert.deepEqual(lines('huge'), [
    'skip volume huge: HugePagesNotRequested: medium HugePages: hugePages storage requested, but there is no resource request for huge pages',
  ]);
  assert.equal(plan.steps.filter((s) => s.volume === 'huge').length, 1);
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
async function mountTableExceptOtherTests(base: string): Promise<string[]> {
  const tmp = `${tmpdir()}/`;
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((l) => !l.includes(tmp) || l.includes(base));
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

mountTest('the daemon then makes exactly the directories, mounts and files the plan printed', async (t) => {
  const { root, hostPath, manifests, manifest } = await demoSetup(t);
  const planned = JSON.parse((await runCli(planArgs(manifest, root, '-o', 'json'))).stdout) as {
    phase: string;
    action: string;
    path: string;
    detail: string;
  }[];
  const p = await startPodvol({ rootDir: root, manifests });
  t.after(async () => {
    await p.stop();
  });
  await waitFor('the demo pod to be set up', async () => {
    const s = await p.status();
    const v = s.pods.find((x) => x.name === 'demo-testnode')?.volumes ?? [];
    return v.filter((x) => x.state === 'mounted').length === 3 || undefined;
  });
  const info = `${root}/pods/${uid}/volumes/kubernetes.io~downward-api/info`;
  const ts = await readlink(join(info, '..data'));
  const real = (path: string) => path.replace('..<timestamp>', ts);
  const mounts = await mountsBelow(root);
  for (const s of planned.filter((x) => x.phase === 'setup')) {
    const path = real(s.path);
    if (s.action === 'mkdir') assert.ok((await stat(path)).isDirectory(), `directory ${path}`);
    if (s.action === 'write') {
      const m = /^mode (0\d+), (\d+) bytes/.exec(s.detail);
      assert.ok(m, s.detail);
      const st = await stat(path);
      assert.equal(`0${(st.mode & 0o777).toString(8)}`, m[1], `mode of ${path}`);
      assert.equal(st.size, Number(m[2]), `size of ${path}`);
    }
    if (s.action === 'symlink') {
      // ..data_tmp only lives until the rename that publishes it as ..data.
      const renamed = planned.find((x) => x.action === 'rename' && x.path === s.path)?.detail;
      assert.equal(await readlink(renamed ?? path), real(s.detail));
    }
    if (s.action === 'mount') {
      const m = mounts.find((x) => x.mountPoint === path);
      assert.ok(m, `mount at ${path}`);
      const size = /size=(\d+)/.exec(s.detail)?.[1];
      assert.ok(size && m.superOptions.split(',').includes(`size=${Number(size) / 1024}k`), m.superOptions);
    }
  }
  assert.deepEqual(
    mounts.map((m) => m.mountPoint).sort(),
    planned
      .filter((s) => s.action === 'mount')
      .map((s) => s.path)
      .sort(),
  );
  assert.equal((await stat(hostPath)).mode & 0o777, 0o755);

  // Tear-down: everything the plan lists under it is gone; the hostPath stays.
  await rm(manifest);
  const podDir = planned.filter((s) => s.phase === 'teardown').at(-1)?.path ?? '';
  await waitFor('the pod directory to be removed', () =>
    stat(podDir).then(
      () => undefined,
      (err: NodeJS.ErrnoException) => err.code === 'ENOENT' || undefined,
    ),
  );
  for (const s of planned.filter((x) => x.phase === 'teardown' && x.action === 'rm'))
    await assert.rejects(stat(s.path), { code: 'ENOENT' }, s.path);
  assert.deepEqual(await mountsBelow(root), []);
  assert.ok((await stat(hostPath)).isDirectory());
});

test('plan shows nested mount points, and refuses a mountPath of .. as SetUp does', () => {
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
  const ctx = createPlanContext({
    rootDir: '/r',
    nodeName: 'n',
    allocatable: { memory: '8Gi' },
    noswap: false,
  });
  const plan = planManifest(JSON.stringify(manifest), 'nest.json', ctx);
  const podUID = plan.pods[0].uid;
  const setup = (volume: string) =>
    plan.steps.filter((s) => s.volume === volume && s.phase === 'setup').map(stepLine);
  const info = `/r/pods/${podUID}/volumes/kubernetes.io~downward-api/info`;
  assert.ok(setup('info').includes(`mkdir -p -m 0755 ${info}/tls`), setup('info').join('\n'));
  const climb = setup('climb').join('\n');
  assert.match(climb, /InvalidPath: invalid container mount point \.\./);
  assert.doesNotMatch(climb, /mkdir/);
});
