// `podvol drain`: the cleanup after a stopped podvol. A dry run changes
// nothing; a running podvol is refused; a busy volume is named with its
// holder and left; then everything podvol made goes, and nothing else.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonDirs, startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';
import { mountsBelow } from '../helpers/mounts.ts';
import { runCli } from './ops/cli.ts';

const manifest = (hostPath: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default' },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: ['scratch', 'fast', 'info', 'host'].map((name) => ({ name, mountPath: `/${name}` })),
        },
      ],
      volumes: [
        { name: 'scratch', emptyDir: {} },
        { name: 'fast', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
        {
          name: 'info',
          downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] },
        },
        { name: 'host', hostPath: { path: hostPath, type: 'DirectoryOrCreate' } },
      ],
    },
  });

async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    out.push(join(e.parentPath, e.name));
  }
  return out.sort();
}

mountTest(
  'drain: dry run, refusal while podvol runs, a busy volume named, then everything torn down',
  async (t) => {
    const base = await tempDir(t);
    const { root, manifests } = await daemonDirs(base);
    const hostPath = join(base, 'host-data');
    await writeFile(join(manifests, 'web.json'), manifest(hostPath));
    const p = await startPodvol({ rootDir: root, manifests });
    t.after(() => p.stop('SIGKILL'));
    const web = await waitFor('web mounted', async () => {
      const pod = (await p.status()).pods.find((x) => x.name === 'web-testnode');
      return pod?.volumes.length === 4 && pod.volumes.every((v) => v.state === 'mounted') && pod;
    });
    await writeFile(join(hostPath, 'keep'), "the host path is not podvol's");
    const drainArgs = (...extra: string[]) => ['drain', '--root-dir', root, ...extra];

    // While podvol runs, drain refuses and names it.
    const refused = await runCli(drainArgs());
    assert.equal(refused.code, 1);
    assert.equal(
      refused.stderr,
      `podvol drain: root directory ${root} is in use by another podvol (pid ${p.proc.pid}, podvol run); stop it first\n`,
    );
    assert.equal(await p.stop(), 0);
    const mounted = (await mountsBelow(root)).map((m) => m.mountPoint).sort();
    assert.equal(
      mounted.length,
      2,
      'stopping unmounted nothing: the tmpfs emptyDir and the downwardAPI wrapper',
    );

    // The dry run lists every volume and pod directory and changes nothing.
    const before = { mounts: mounted, tree: await tree(root) };
    const dry = await runCli(drainArgs('--dry-run'));
    assert.equal(dry.code, 0, dry.stderr);
    const podDir = join(root, 'pods', web.uid);
    // hostPath has no directory in the pod (as in kubelet), so there is nothing of it to tear down.
    for (const v of ['scratch', 'fast', 'info']) {
      assert.match(
        dry.stdout,
        new RegExp(
          `^would tear down volume ${v} \\(kubernetes\\.io/[a-z-]+\\) of pod default/web-testnode \\(${web.uid}\\): ${podDir}/volumes/`,
          'm',
        ),
      );
    }
    assert.match(
      dry.stdout,
      new RegExp(`^would remove pod directory ${podDir}, once nothing is mounted below it$`, 'm'),
    );
    for (const m of mounted) assert.ok(dry.stdout.includes(`mounted now: ${m}\n`), m);
    const json = await runCli(drainArgs('--dry-run', '-o', 'json'));
    assert.equal(JSON.parse(json.stdout).volumes.length, 3);
    assert.deepEqual((await mountsBelow(root)).map((m) => m.mountPoint).sort(), before.mounts);
    assert.deepEqual(await tree(root), before.tree);

    // A process working in the tmpfs volume keeps it busy: drain names it, takes down the rest, and exits 1.
    const fast = join(podDir, 'volumes', 'kubernetes.io~empty-dir', 'fast');
    const holder: ChildProcess = spawn('sleep', ['1000'], { cwd: fast, stdio: 'ignore' });
    t.after(() => {
      holder.kill('SIGKILL');
    });
    const busy = await runCli(drainArgs('--timeout', '3s'));
    assert.equal(busy.code, 1);
    assert.match(
      busy.stderr,
      new RegExp(
        `volume fast \\(kubernetes\\.io/empty-dir\\) of pod default/web-testnode .*: UnmountFailed: .*target is busy, held by pid ${holder.pid} \\(sleep\\): cwd`,
      ),
    );
    assert.deepEqual(
      (await mountsBelow(root)).map((m) => m.mountPoint),
      [fast],
    );

    // With the holder gone, everything podvol made goes: mounts, pod directory, records. The host path stays.
    holder.kill('SIGKILL');
    await waitFor('the holder to exit', () => holder.exitCode !== null || holder.signalCode !== null);
    const done = await runCli(drainArgs());
    assert.equal(done.stderr, '');
    assert.equal(done.code, 0);
    assert.match(done.stdout, /^drained: \d+ volumes torn down, 1 pod directories removed$/m);
    assert.deepEqual(await mountsBelow(root), []);
    assert.deepEqual(await readdir(root), []);
    assert.equal(await readFile(join(hostPath, 'keep'), 'utf8'), "the host path is not podvol's");

    // Draining a drained (or missing) root is a no-op.
    const again = await runCli(drainArgs());
    assert.equal(again.code, 0);
    assert.match(again.stdout, /drained: 0 volumes torn down, 0 pod directories removed/);
    const missing = await runCli(['drain', '--root-dir', join(base, 'nope')]);
    assert.equal(missing.code, 0);
    assert.match(missing.stdout, /nothing to drain/);
    await assert.rejects(stat(join(base, 'nope')), { code: 'ENOENT' });
  },
);
