// npm test: runs every test/**/*.test.ts with node's test runner. As root the
// whole run happens inside a private mount namespace (unshare --mount
// --propagation private) so real mounts made by tests never reach the host.
//
// Tests leave nothing behind: they run with TMPDIR set to a directory of this
// run, which must be empty when they end. Whatever a test left there is listed,
// fails the run, and is removed (the mount namespace, and every mount in it,
// is gone by then).
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

function findTests(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return findTests(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

// `npm run chaos` (--chaos): only test/chaos/, each suite at its full size
// (PODVOL_CHAOS=full), one at a time so their figures do not disturb each other.
const chaos = process.argv.includes('--chaos');
const filter = chaos ? ['test/chaos/'] : process.argv.slice(2);
const files = findTests('test')
  .map((f) => relative('.', f))
  .filter((f) => filter.length === 0 || filter.some((x) => f.includes(x)))
  .sort();

// What the tests need from Debian, installed as root when missing: promtool
// (package prometheus) checks a live scrape; crun and busybox-static run real
// containers on podvol's mounts (test/agent/runtime/crun.e2e.test.ts); bindfs
// is a FUSE filesystem to hang (test/chaos/hung-fs.chaos.test.ts). It pulls in
// Debian's fuse, whose mount.fuse then takes every `mount -t fuse.*`: test
// helpers mount their own FUSE with `mount -i`.
// The containers' rootfs is one static busybox: a dynamic one would need a libc in it.
function staticBusybox(): boolean {
  if (!existsSync('/bin/busybox')) return false;
  const q = spawnSync('dpkg-query', ['--status', 'busybox-static'], { encoding: 'utf8' });
  return q.status === 0 && q.stdout.includes('Status: install ok installed');
}
const has = (cmd: string, arg = '--version') => !spawnSync(cmd, [arg], { stdio: 'ignore' }).error;
const missing = [
  ...(has('promtool') ? [] : ['prometheus']),
  ...(has('crun') ? [] : ['crun']),
  ...(staticBusybox() ? [] : ['busybox-static']),
  // A real FUSE filesystem whose daemon the hung-filesystem chaos test stops (SIGSTOP).
  ...(has('bindfs') ? [] : ['bindfs']),
  // The CSI test driver's loop-device backend formats with mkfs.ext4 and grows with resize2fs.
  ...(has('mkfs.ext4', '-V') ? [] : ['e2fsprogs']),
];
if (missing.length > 0 && process.getuid?.() === 0 && has('apt-get')) {
  console.log(`# installing ${missing.join(', ')}: apt-get install`);
  const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', RUNLEVEL: '1' };
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env: aptEnv, timeout: 300_000 });
  spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], {
    stdio: 'inherit',
    env: aptEnv,
    timeout: 600_000,
  });
}

// Suites whose assertions are latencies (the floods' p99 ≤ 1 s is the issue's contract) run
// after the rest, alone: beside another suite's mount churn they measured that suite, not podvol.
const alone = (f: string) => f.includes('floods.chaos');
const phases = [files.filter((f) => !alone(f)), files.filter(alone)].filter((p) => p.length > 0);
const isRoot = process.getuid?.() === 0;
const canUnshare =
  isRoot && spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']).status === 0;

const commandOf = (phase: string[], concurrency: number): [string, string[]] => {
  const nodeArgs = ['--test', '--test-reporter=spec', `--test-concurrency=${concurrency}`, ...phase];
  return canUnshare
    ? ['unshare', ['--mount', '--propagation', 'private', '--', process.execPath, ...nodeArgs]]
    : [process.execPath, nodeArgs];
};
if (!canUnshare) {
  console.log(
    `# mount tests will skip: ${isRoot ? 'unshare --mount is not available' : 'not running as root'}`,
  );
}
const runTmp = mkdtempSync(join(tmpdir(), 'podvol-tests-'));
// Traversable (not listable) by other users: a test runs a non-root caller against a socket below it.
chmodSync(runTmp, 0o711);
const env = {
  ...process.env,
  PODVOL_MOUNTNS: canUnshare ? '1' : '0',
  TMPDIR: runTmp,
  // npm 11 (run by the tests of npm start) keeps a module compile cache in the temp directory,
  // which must end empty: npm's cache, not something a test left, so it is off for the run.
  NODE_DISABLE_COMPILE_CACHE: '1',
  ...(chaos ? { PODVOL_CHAOS: 'full' } : {}),
};
let status = 0;
phases.forEach((phase, i) => {
  const [cmd, args] = commandOf(phase, chaos || i > 0 ? 1 : 2);
  const result = spawnSync(cmd, args, { stdio: 'inherit', env });
  if (result.status !== 0) status = result.status ?? 1;
});
const leftovers = readdirSync(runTmp);
rmSync(runTmp, { recursive: true, force: true });
// A test that leaves something in the temp directory fails the run: the machine's temp dir
// must stay clean however the tests end.
if (leftovers.length > 0) {
  console.log(
    `# tests left ${leftovers.length} entries in the temp directory: ${leftovers.sort().join(' ')}`,
  );
  process.exit(1);
}
process.exit(status);
