// Stopping podvol by a PID the operator sees: npm start's own PID, or the PID
// of bin/podvol.js when an old Node made it re-run itself with node_modules'
// Node 24. Either way podvol itself gets the signal and stops, nothing is left
// orphaned (holding the port and the root-directory lock), and the process
// signalled ends with podvol's exit code.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { freePort, repoRoot, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The PID podvol logs in its "podvol started" line. */
async function startedPid(child: ResultPromise): Promise<number> {
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  return waitFor(
    'podvol started',
    () => {
      const line = out.split('\n').find((l) => l.includes('"msg":"podvol started"'));
      return line ? Number(JSON.parse(line).pid) : undefined;
    },
    120_000,
  );
}

/** Flags that keep podvol inside the test's temp dir: root, hostPaths (examples/ has one), no /run/podvol socket. */
const contained = async (dir: string) => [
  '--root-dir',
  join(dir, 'root'),
  '--host-root',
  dir,
  '--runtime-socket',
  '',
  '--listen',
  `127.0.0.1:${await freePort()}`,
];

const hasNpm = !spawnSync('npm', ['--version'], { stdio: 'ignore', timeout: 30_000 }).error;

mountTest('npm start stopped by npm’s PID stops podvol itself', async (t) => {
  if (!hasNpm) return t.skip('npm is not on PATH');
  const dir = await tempDir(t);
  const npm = execa('npm', ['start', '--', ...(await contained(dir))], {
    cwd: repoRoot,
    reject: false,
    timeout: 180_000,
  });
  const podvol = await startedPid(npm);
  t.after(() => {
    if (alive(podvol)) process.kill(podvol, 'SIGKILL');
  });
  assert.notEqual(podvol, npm.pid);
  npm.kill('SIGTERM');
  // Before awaiting npm: an orphaned podvol would hold npm's output open, and the wait with it.
  await waitFor('podvol to exit', () => !alive(podvol), 30_000);
  const r = await npm;
  assert.equal(r.exitCode, 0, r.stderr);
});

// A Node too old for the sources, as a Debian machine's 18 or 20 behind `npm link`.
const oldNode = ['/usr/bin/node', '/usr/local/bin/node'].find((n) => {
  const v = spawnSync(n, ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 30_000 });
  const [major = 0, minor = 0] = (v.stdout ?? '').trim().split('.').map(Number);
  return v.status === 0 && (major < 22 || (major === 22 && minor < 18));
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  mountTest(`under an old Node, ${signal} to bin/podvol.js reaches the podvol it re-ran`, async (t) => {
    if (!oldNode) return t.skip('no Node older than 22.18 on this machine');
    const dir = await tempDir(t);
    const manifests = join(dir, 'manifests');
    await mkdir(manifests);
    const parent = execa(
      oldNode,
      [
        join(repoRoot, 'bin', 'podvol.js'),
        'run',
        '--pod-manifest-path',
        manifests,
        ...(await contained(dir)),
      ],
      { reject: false, timeout: 180_000 },
    );
    const podvol = await startedPid(parent);
    t.after(() => {
      if (alive(podvol)) process.kill(podvol, 'SIGKILL');
    });
    assert.notEqual(podvol, parent.pid, 'podvol runs as a child under Node 24');
    parent.kill(signal);
    const r = await parent;
    await waitFor('podvol to exit', () => !alive(podvol), 30_000);
    assert.equal(r.exitCode, 0, r.stderr);
  });
}

mountTest('under an old Node, bin/podvol.js exits with the code of the podvol it re-ran', async (t) => {
  if (!oldNode) return t.skip('no Node older than 22.18 on this machine');
  const r = await execa(oldNode, [join(repoRoot, 'bin', 'podvol.js'), 'plan'], {
    reject: false,
    timeout: 120_000,
  });
  assert.equal(r.exitCode, 2);
  assert.match(r.stderr, /required option '-f, --filename <file>'/);
});
