// Real containers on podvol's mounts: `podvol mounts` output goes unchanged
// into an OCI bundle's config.json, crun runs it, and the assertions are on
// what the container itself sees.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { lstat, mkdir, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { callRuntime } from '../../../src/agent/runtime/client.ts';
import { startTestApiServer } from '../../apiserver/server.ts';
import {
  crunAvailable,
  hideHybridCgroups,
  type OciMount,
  runContainer,
  startContainer,
} from '../../helpers/crun.ts';
import { daemonDirs, runtimeSocketOf, startPodvol, waitFor as waitForShort } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { mountsBelow } from '../../helpers/mounts.ts';
import { apiPod, kubeApiAccessVolume, uidOf } from '../../helpers/pods.ts';
import { runCli } from '../ops/cli.ts';

/** The helper's waits, with a default fit for a machine busy with other test runs. */
const waitFor = <T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 120_000,
) => waitForShort(what, fn, ms);

const b64 = (s: string) => Buffer.from(s).toString('base64');

function crunTest(name: string, fn: (t: TestContext) => Promise<void>) {
  mountTest(name, async (t) => {
    const missing = crunAvailable();
    // scripts/test.ts installs crun and busybox-static; under CI their absence is a failure.
    if (missing && process.env.CI === 'true') throw new Error(`cannot run containers: ${missing}`);
    if (missing) return t.skip(missing);
    await hideHybridCgroups(t);
    await fn(t);
  });
}

/** Waits (generously: the machine may be busy) until podvol has every volume of the pod mounted. */
async function waitMounted(socket: string, name: string): Promise<string> {
  const uid = await waitFor(
    `pod ${name} known`,
    async () => {
      const pods = (await callRuntime(socket, 'GET', '/v1/pods', 30_000)).body.pods as {
        uid: string;
        name: string;
      }[];
      return pods.find((p) => p.name === name)?.uid;
    },
    120_000,
  );
  const r = await callRuntime(socket, 'GET', `/v1/pods/${uid}/volumes?wait=240`, 300_000);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return uid;
}

/** `podvol mounts POD -c NAME -o json`, as a runtime would call it. */
async function mountsOf(socket: string, pod: string, container: string) {
  const r = await runCli(['mounts', pod, '-c', container, '-o', 'json', '--runtime-socket', socket]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { mounts: OciMount[]; supplementalGroups: number[]; uid: string };
}

const shopPod = (hostDir: string) =>
  apiPod('shop', 'testnode', {
    containers: [
      {
        name: 'app',
        image: 'busybox',
        env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
        volumeMounts: [
          { name: 'cfg', mountPath: '/cfg' },
          { name: 'cfg', mountPath: '/etc/app.conf', subPath: 'app.conf' },
          { name: 'sec', mountPath: '/sec' },
          { name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
          { name: 'info', mountPath: '/info' },
          { name: 'shared', mountPath: '/shared' },
          { name: 'shared', mountPath: '/sub', subPath: 'dir/sub' },
          { name: 'shared', mountPath: '/expr', subPathExpr: 'pods/$(POD_NAME)' },
          { name: 'host', mountPath: '/host' },
          { name: 'host', mountPath: '/host-ro', readOnly: true },
        ],
      },
      { name: 'peer', image: 'busybox', volumeMounts: [{ name: 'shared', mountPath: '/data' }] },
    ],
    volumes: [
      { name: 'cfg', configMap: { name: 'app-config', defaultMode: 0o644 } },
      { name: 'sec', secret: { secretName: 'creds', defaultMode: 0o400 } },
      kubeApiAccessVolume(),
      {
        name: 'info',
        downwardAPI: {
          defaultMode: 0o644,
          items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }],
        },
      },
      { name: 'shared', emptyDir: {} },
      { name: 'host', hostPath: { path: hostDir, type: 'Directory' } },
    ],
  });

crunTest(
  'crun: a container sees configMap, secret, token, downwardAPI, emptyDir, hostPath and subPaths as kubelet mounts them',
  async (t) => {
    const api = await startTestApiServer();
    t.after(() => api.close());
    const base = await tempDir(t);
    const s = api.store;
    s.create('nodes', {
      metadata: { name: 'testnode' },
      status: { allocatable: { cpu: '2', memory: '4Gi' } },
    });
    s.create('serviceaccounts', { metadata: { name: 'default', namespace: 'default' } });
    const cm = s.create('configmaps', {
      metadata: { name: 'app-config', namespace: 'default' },
      data: { 'app.conf': 'v1' },
    });
    s.create('secrets', {
      metadata: { name: 'creds', namespace: 'default' },
      data: { password: b64('s3cret') },
    });
    const hostDir = join(base, 'host');
    await mkdir(hostDir);
    await writeFile(join(hostDir, 'hello'), 'from the host');
    const pod = s.create('pods', shopPod(hostDir));
    const uid = uidOf(pod);
    const root = join(base, 'root');
    const socket = runtimeSocketOf(root);
    const p = await startPodvol({ rootDir: root, extra: ['--kubeconfig', await api.kubeconfigPath(base)] });
    t.after(() => p.stop());

    await waitMounted(socket, 'shop');
    const wait = await runCli(['wait', 'default/shop', '--timeout', '90s', '--runtime-socket', socket]);
    assert.equal(wait.code, 0, wait.stderr);
    const app = await mountsOf(socket, 'default/shop', 'app');
    const token = api.hooks.issuedTokens.at(-1)?.token;
    assert.ok(token);

    const run = await runContainer(base, {
      mounts: app.mounts,
      args: [
        'sh',
        '-c',
        [
          'cd /',
          'cat /cfg/app.conf; echo',
          'cat /etc/app.conf; echo',
          'stat -L -c "%a %u %g" /cfg/app.conf /sec/password',
          'cat /sec/password; echo',
          'cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo',
          'cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo',
          'cat /host/hello; echo',
          'echo written > /host/by-container && echo host-rw-ok',
          '(echo x > /host-ro/nope) 2>/dev/null && echo host-ro-WRITABLE || echo host-ro-refused',
          '(echo x > /cfg/new) 2>/dev/null && echo cfg-WRITABLE || echo cfg-refused',
          'echo shared-by-app > /shared/note',
          'echo in-sub > /sub/f && echo sub-ok',
          'echo in-expr > /expr/f && echo expr-ok',
        ].join('; '),
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.stdout.trim().split('\n'), [
      'v1',
      'v1',
      '644 0 0',
      '400 0 0',
      's3cret',
      token,
      'default',
      'from the host',
      'host-rw-ok',
      'host-ro-refused',
      'cfg-refused',
      'sub-ok',
      'expr-ok',
    ]);
    const emptyDir = join(root, 'pods', uid, 'volumes/kubernetes.io~empty-dir/shared');
    assert.equal(
      (await stat(join(emptyDir, 'dir/sub/f'))).isFile(),
      true,
      'the subPath directory is inside the volume',
    );
    assert.equal((await stat(join(emptyDir, 'pods/shop/f'))).isFile(), true, 'subPathExpr expanded POD_NAME');
    assert.equal((await stat(join(hostDir, 'by-container'))).isFile(), true);

    // A second container of the same pod shares the emptyDir.
    const peer = await mountsOf(socket, uid, 'peer');
    const peerRun = await runContainer(base, { mounts: peer.mounts, args: ['cat', '/data/note'] });
    assert.equal(peerRun.stdout, 'shared-by-app\n', peerRun.stderr);

    // An update reaches a running container through the whole volume, not through the subPath (as in kubelet).
    const running = await startContainer(base, {
      mounts: app.mounts,
      args: ['sh', '-c', 'while true; do echo "$(cat /cfg/app.conf) $(cat /etc/app.conf)"; sleep 0.2; done'],
    });
    t.after(() => running.stop());
    await waitFor('container running', () => running.output().includes('v1 v1'), 30_000);
    s.update('configmaps', { ...cm, data: { 'app.conf': 'v2' } });
    await waitFor('update visible in the container', () => running.output().includes('v2 v1'), 60_000);
    assert.ok(!running.output().includes('v2 v2'), 'a subPath mount keeps the old content');
    await running.stop();

    // The runtime reports the pod gone; podvol tears it down, subpaths first.
    s.delete('pods', 'default', 'shop');
    const term = await callRuntime(socket, 'POST', `/v1/pods/${uid}/terminated`, 10_000);
    assert.equal(term.status, 200);
    await waitFor(
      'all unmounted',
      async () => (await mountsBelow(join(root, 'pods', uid))).length === 0,
      60_000,
    );
  },
);

crunTest(
  'crun: subPath escapes (CVE-2017-1002101, CVE-2021-25741) fail with kubelet errors and expose nothing',
  async (t) => {
    const base = await tempDir(t);
    const { root, manifests } = await daemonDirs(base);
    const socket = runtimeSocketOf(root);
    const container = (name: string, subPath: string) => ({
      name,
      image: 'busybox',
      volumeMounts: [{ name: 'data', mountPath: '/mnt', subPath }],
    });
    await writeFile(
      join(manifests, 'evil.json'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'evil', namespace: 'default' },
        spec: {
          containers: [
            { name: 'writer', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
            container('root-link', 'escape'),
            container('file-link', 'passwd'),
            // One container per attempt: an answer is cached per container once served.
            ...Array.from({ length: 30 }, (_, i) => container(`race-${i}`, 'swap')),
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      }),
    );
    const p = await startPodvol({ rootDir: root, manifests });
    t.after(() => p.stop());
    await waitMounted(socket, 'evil-testnode');
    assert.equal((await runCli(['wait', 'default/evil-testnode', '--runtime-socket', socket])).code, 0);

    // The pod's own container plants the links (CVE-2017-1002101).
    const writer = await mountsOf(socket, 'default/evil-testnode', 'writer');
    const planted = await runContainer(base, {
      mounts: writer.mounts,
      args: [
        'sh',
        '-c',
        'ln -s / /data/escape && ln -s /etc/passwd /data/passwd && mkdir /data/real && echo inside > /data/real/marker && echo ok',
      ],
    });
    assert.equal(planted.stdout, 'ok\n', planted.stderr);
    const uid = writer.uid;
    const podDir = join(root, 'pods', uid);
    const before = (await mountsBelow(podDir)).length;
    for (const [name, ctr] of [
      ['escape', 'root-link'],
      ['passwd', 'file-link'],
    ] as const) {
      const r = await runCli(['mounts', uid, '-c', ctr, '-o', 'json', '--runtime-socket', socket]);
      assert.equal(r.code, 1, `${name}: ${r.stdout}`);
      assert.equal(
        r.stderr,
        `podvol mounts: SubPathFailed: failed to prepare subPath for volumeMount "data" of container "${ctr}"\n`,
      );
    }
    assert.equal((await mountsBelow(podDir)).length, before, 'nothing was mounted');

    // CVE-2021-25741: the subPath flips between a directory and a symlink to / while podvol prepares it.
    const volume = join(podDir, 'volumes/kubernetes.io~empty-dir/data');
    await symlink('/', join(volume, 'link'));
    await rename(join(volume, 'real'), join(volume, 'swap'));
    const swapper = spawn(process.execPath, [
      '-e',
      `const fs = require('node:fs'); const v = ${JSON.stringify(volume)};
     for (;;) { try { fs.renameSync(v + '/swap', v + '/real'); fs.renameSync(v + '/link', v + '/swap'); fs.renameSync(v + '/swap', v + '/link'); fs.renameSync(v + '/real', v + '/swap'); } catch {} }`,
    ]);
    t.after(() => swapper.kill('SIGKILL'));
    let served = 0;
    let refused = 0;
    const last = { container: '' };
    for (let i = 0; i < 30; i++) {
      const ctr = `race-${i}`;
      const r = await callRuntime(socket, 'GET', `/v1/pods/${uid}/containers/${ctr}/mounts`, 30_000);
      if (r.status === 200) {
        served++;
        last.container = ctr;
        const target = join(podDir, `volume-subpaths/data/${ctr}/0`);
        // Whatever was mounted is the directory from inside the volume, never the host's root.
        const st = await lstat(target);
        assert.ok(st.isDirectory());
        await assert.rejects(stat(join(target, 'etc/passwd')), 'the host root is not behind the subpath');
      } else {
        refused++;
        assert.equal(r.status, 422, JSON.stringify(r.body));
        assert.match(
          String(r.body.message),
          new RegExp(
            `^failed to (prepare|create) subPath( directory)? for volumeMount "data" of container "${ctr}"$`,
          ),
        );
      }
    }
    swapper.kill('SIGKILL');
    assert.equal(served + refused, 30);
    t.diagnostic(`subPath race: ${served} served (the directory), ${refused} refused`);
    if (served > 0) {
      // And a container started on it sees the volume's directory (or the empty one podvol made), not /.
      const race = await mountsOf(socket, uid, last.container);
      const seen = await runContainer(base, {
        mounts: race.mounts,
        args: ['sh', '-c', 'ls /mnt; test -e /mnt/etc/passwd && echo LEAK || echo contained'],
      });
      assert.match(seen.stdout, /contained\n$/, seen.stdout + seen.stderr);
    }
  },
);

crunTest(
  'crun: downwardAPI bytes and fsGroup ownership and modes, as the container (a non-root user in the fsGroup) sees them',
  async (t) => {
    const base = await tempDir(t);
    const { root, manifests } = await daemonDirs(base);
    const socket = runtimeSocketOf(root);
    await writeFile(
      join(manifests, 'owned.json'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'owned', namespace: 'default', labels: { tier: 'front', app: 'web' } },
        spec: {
          securityContext: { fsGroup: 2000 },
          // Pod-level limits: the container sets no cpu limit, so limits.cpu reports the pod's.
          resources: { limits: { cpu: '500m', memory: '128Mi' } },
          containers: [
            {
              name: 'app',
              image: 'busybox',
              resources: { limits: { memory: '64Mi' } },
              volumeMounts: [
                { name: 'info', mountPath: '/info' },
                { name: 'data', mountPath: '/data' },
                { name: 'proj', mountPath: '/proj' },
              ],
            },
          ],
          volumes: [
            {
              name: 'info',
              downwardAPI: {
                items: [
                  { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
                  { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
                  { path: 'private/ns', mode: 0o400, fieldRef: { fieldPath: 'metadata.namespace' } },
                  {
                    path: 'mem',
                    resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1Mi' },
                  },
                  {
                    path: 'cpu',
                    resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' },
                  },
                ],
              },
            },
            { name: 'data', emptyDir: {} },
            {
              name: 'proj',
              projected: {
                defaultMode: 0o440,
                sources: [
                  {
                    downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
                  },
                ],
              },
            },
          ],
        },
      }),
    );
    const p = await startPodvol({ rootDir: root, manifests });
    t.after(() => p.stop());
    const uid = await waitMounted(socket, 'owned-testnode');
    const app = await mountsOf(socket, uid, 'app');
    // As a runtime runs a pod with an fsGroup: a non-root user with the fsGroup among its groups.
    const run = await runContainer(base, {
      mounts: app.mounts,
      uid: 1000,
      gid: 3000,
      additionalGids: [2000, ...app.supplementalGroups],
      args: [
        'sh',
        '-c',
        [
          'cd /',
          // '|' shows where each file ends: kubelet writes no trailing newline.
          "cat /info/labels; echo '|'",
          "cat /info/name; echo '|'",
          "cat /info/mem; echo '|'",
          "cat /info/cpu; echo '|'",
          // Mode 0400 for root: readable by this user only through the fsGroup's group bits.
          "cat /info/private/ns; echo '|'",
          "cat /proj/labels; echo '|'",
          'stat -L -c "%n %a %u %g" /info/labels /info/private/ns /info/mem /proj/labels',
          'stat -c "%n %a %u %g" /data',
          'echo x > /data/new && stat -c "%n %u %g" /data/new',
          '(echo x > /info/x) 2>/dev/null && echo info-WRITABLE || echo info-refused',
        ].join('; '),
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.stdout.split('\n'), [
      'app="web"',
      'tier="front"|',
      'owned-testnode|',
      '64|',
      '500|',
      'default|',
      'app="web"',
      'tier="front"|',
      // SetVolumeOwnership: group fsGroup, group read added (read-only volumes: 0440), setgid on directories.
      '/info/labels 644 0 2000',
      '/info/private/ns 440 0 2000',
      '/info/mem 644 0 2000',
      '/proj/labels 440 0 2000',
      // An emptyDir is 0777 plus the setgid bit, group fsGroup: new files inherit the group.
      '/data 2777 0 2000',
      '/data/new 1000 2000',
      'info-refused',
      '',
    ]);
  },
);
