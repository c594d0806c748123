// The plan is the daemon: every pod of examples/ and of test/fixtures/plan-corpus
// is planned, then set up by a real podvol (real mounts, in the test's private
// mount namespace), and every directory, file, symlink and mount below the root
// directory and the --host-root is compared with what the plan said: kind, mode,
// owner, group, file size, link target, mount type and size. Then the pods go
// away and what is left is compared with the plan's tear-down the same way.
import assert from 'node:assert/strict';
import { copyFile, lstat, mkdir, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { failingVolumes, type PlannedState, planSource } from '../../../src/agent/ops/plan.ts';
import { createStaticPodSource } from '../../../src/agent/pods/static-source.ts';
import { silentLogger } from '../../../src/logger.ts';
import { daemonDirs, repoRoot, startPodvol, waitFor } from '../../helpers/daemon.ts';
import { mountTest, tempDir } from '../../helpers/mountns.ts';
import { mountsBelow } from '../../helpers/mounts.ts';

/** The atomic writer's timestamped directory, named differently on every run. */
const stable = (s: string) => s.replace(/\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+/g, '..<timestamp>');

/**
 * What the daemon makes that is no volume's, so the plan leaves it out: the
 * root directory's mark (root-dir.ts) and the CSI registration directory
 * (plugin-watcher.ts).
 */
const notPlanned = (root: string, path: string) =>
  [join(root, 'podvol', 'root-dir.json'), join(root, 'plugins_registry')].includes(path);

type Entry = PlannedState['entries'][number];

/**
 * kubelet's config.seen annotation is the time the pod was first seen, which
 * differs between the plan and the daemon (and so may its length: Go's
 * RFC3339Nano drops trailing zeros); so does a volume record's `created`, the
 * time the volume was first desired. Everything else of a file is compared.
 */
const sameTime = (data: Buffer) =>
  data
    .toString('utf8')
    .replace(/kubernetes\.io\/config\.seen="[^"]*"/g, 'kubernetes.io/config.seen="<time>"')
    .replace(/"created":"[^"]*"/g, '"created":"<time>"');

function line(e: Entry): string {
  const file = e.kind === 'file' ? ` ${JSON.stringify(sameTime(e.data ?? Buffer.alloc(0)))}` : '';
  const target = e.target === undefined ? '' : ` -> ${e.target}`;
  return `${e.path} ${e.kind} ${e.mode.toString(8)} ${e.uid}:${e.gid}${file}${target}`;
}

async function realEntries(root: string, dirs: string[]): Promise<string[]> {
  const out: string[] = [];
  const visit = async (path: string) => {
    if (notPlanned(root, path)) return;
    const st = await lstat(path);
    const kind = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'other';
    out.push(
      line({
        path: stable(path),
        kind,
        mode: st.mode & 0o7777,
        size: st.size,
        uid: st.uid,
        gid: st.gid,
        target: kind === 'symlink' ? stable(await readlink(path)) : undefined,
        data: kind === 'file' ? await readFile(path) : undefined,
      }),
    );
    if (kind === 'dir') for (const name of (await readdir(path)).sort()) await visit(join(path, name));
  };
  for (const d of dirs) await visit(d);
  return out;
}

/** `tmpfs size=65536k` as the kernel shows it, `size=67108864` as podvol passes it: the same bytes. */
function mountLine(path: string, fsType: string, options: readonly string[]): string {
  const size = options.find((o) => o.startsWith('size='))?.slice(5);
  const bytes =
    size === undefined ? '' : size.endsWith('k') ? String(Number(size.slice(0, -1)) * 1024) : size;
  // podvol passes kubelet's pagesize=2Mi; the kernel shows it as 2M.
  const page = options
    .find((o) => o.startsWith('pagesize='))
    ?.slice(9)
    .replace(/([KMG])i$/, '$1');
  return `${path} ${fsType}${bytes ? ` size=${bytes}` : ''}${page ? ` pagesize=${page}` : ''}`;
}

mountTest(
  'plan and daemon make the same directories, files and mounts for examples/ and the plan corpus',
  async (t) => {
    const base = await tempDir(t);
    const { root, manifests } = await daemonDirs(base);
    const hostRoot = join(base, 'host');
    // hostpaths.yaml expects this directory on the host.
    await mkdir(join(hostRoot, 'srv', 'plan', 'files'), { recursive: true, mode: 0o755 });
    const corpus = join(repoRoot, 'test', 'fixtures', 'plan-corpus');
    for (const dir of [join(repoRoot, 'examples'), corpus]) {
      for (const f of await readdir(dir)) {
        if (/\.(ya?ml|json)$/.test(f)) await copyFile(join(dir, f), join(manifests, f));
      }
    }

    // The pods exactly as `podvol run --pod-manifest-path` reads them (same UIDs), planned in standalone mode.
    const source = createStaticPodSource({ dir: manifests, nodeName: 'testnode', logger: silentLogger() });
    await source.start();
    await source.stop();
    assert.deepEqual(source.errors(), []);
    const plan = await planSource(source.pods(), source.errors(), {
      rootDir: root,
      nodeName: 'testnode',
      api: 'standalone',
      hostRoot,
    });
    assert.ok(plan.pods.length >= 9, `${plan.pods.length} pods`);
    await assert.rejects(lstat(root), { code: 'ENOENT' }, 'planning created nothing');

    const p = await startPodvol({ rootDir: root, manifests, extra: ['--host-root', hostRoot] });
    t.after(async () => {
      await p.stop();
    });
    const planned = failingVolumes(plan)
      .map((s) => `${s.pod} ${s.volume} ${s.detail.split(':')[0]}`)
      .sort();
    // Every volume set up, or failed (at least once) for the reason the plan gave.
    const failed = await waitFor(
      'every volume to be set up or to have failed',
      async () => {
        const s = await p.status();
        if (s.pods.length !== plan.pods.length) return undefined;
        const volumes = s.pods.flatMap((pod) => pod.volumes.map((v) => ({ pod, v })));
        if (volumes.some(({ v }) => v.state !== 'mounted' && !(v.state === 'failed' && v.attempts > 0)))
          return undefined;
        return volumes
          .filter(({ v }) => v.state === 'failed')
          .map(({ pod, v }) => `${pod.namespace}/${pod.name} ${v.name} ${v.reason}`)
          .sort();
      },
      120_000,
    );
    assert.deepEqual(failed, planned);

    const dirs = [root, hostRoot];
    // A failed volume is retried with backoff, and a retry briefly makes (and rolls back) its wrapper:
    // the tree is compared once it is at rest, and any lasting difference is shown.
    const atRest = async <T>(what: string, read: () => Promise<T>, want: T): Promise<T> => {
      let last = await read();
      await waitFor(
        what,
        async () => {
          last = await read();
          return isDeepStrictEqual(last, want) || undefined;
        },
        30_000,
      ).catch(() => {});
      return last;
    };
    const realMounts = async () =>
      (await mountsBelow(root)).map((m) => mountLine(m.mountPoint, m.fsType, m.superOptions)).sort();
    const plannedMounts = plan.setUp.mounts.map((m) => mountLine(m.path, m.fsType, m.options)).sort();
    const setUp = plan.setUp.entries.map(line);
    assert.deepEqual(await atRest('the planned tree', () => realEntries(root, dirs), setUp), setUp);
    const mounts = await atRest('the planned mounts', realMounts, plannedMounts);
    assert.deepEqual(mounts, plannedMounts);
    for (const want of ['hugetlbfs pagesize=2M', 'tmpfs size=1048576'])
      assert.ok(
        mounts.some((m) => m.includes(want)),
        `a ${want} mount in ${mounts.join(', ')}`,
      );

    // Tear-down: the pods go away; what is left is what the plan left.
    for (const f of await readdir(manifests)) await rm(join(manifests, f));
    // Orphan clean-up removes a pod's directory, then its records: wait for both.
    const empty = async (dir: string) => (await readdir(dir)).length === 0;
    await waitFor(
      'every pod directory and record to be removed',
      async () =>
        ((await empty(join(root, 'pods'))) && (await empty(join(root, 'podvol', 'pods')))) || undefined,
      120_000,
    );
    assert.deepEqual(await mountsBelow(root), []);
    assert.deepEqual(await realEntries(root, dirs), plan.tornDown.entries.map(line));
  },
);
