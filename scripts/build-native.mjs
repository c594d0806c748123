// npm's install hook: builds every Node-API addon in native/ (native/<name>/<name>.c
// into native/<name>/build/<name>.node) with the C compiler and the Node-API
// headers from the node-api-headers package. Node-API is ABI-stable, so the
// result loads in any Node >= 18 whatever Node ran this script. Plain
// JavaScript on purpose: `npm ci --omit=dev` runs it with the machine's Node,
// which may not strip TypeScript types.
//
// - peercred: SO_PEERCRED for the runtime socket.
// - openat2: one-call safe path resolution for safe-fs.
// - mountwatch: the kernel's mount-table change signal (poll POLLPRI on
//   /proc/self/mountinfo), so the table is read once per change.
// - sockq: a socket's queues: the bytes waiting unread in a connection
//   (FIONREAD) and TCP_DEFER_ACCEPT on a listener, so a flood of silent
//   connections neither costs descriptors nor closes a probe before it spoke.
// - malloctrim: malloc_trim(3), so the memory give-back after a big teardown
//   returns the C heap's free pages too.
// - spawn: posix_spawn(3) for every mount, umount and stat process, so starting
//   one does not fork (copy the page tables of) the whole daemon.
//
// A missing compiler is not an install failure: without peercred podvol
// refuses to open its runtime socket (it cannot check who connects) and says
// why; without openat2 safe-fs walks paths one component at a time, as on a
// kernel older than 5.6; without mountwatch every mount-table question reads
// /proc/self/mountinfo again; without sockq the HTTP port accepts silent
// connections at once, and under a flood of them a probe can be closed before
// its request arrives; without malloctrim the give-back after a big teardown
// returns V8's heap only; without spawn every process is started by fork from
// a worker thread (slower, more so the larger the daemon). Every other part of podvol works.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** What each addon's absence costs, for the warning. */
const without = {
  peercred: 'the runtime socket will be unavailable',
  openat2: 'safe-fs walks paths component by component (slower, as safe)',
  mountwatch: 'the mount table is read for every question instead of once per change (slower, as fresh)',
  sockq: 'under a flood of silent connections a probe can be closed before its request arrives',
  malloctrim: 'the memory give-back after a big teardown returns V8 heap only, not the C heap',
  spawn: 'mount and umount processes are started by fork from a worker thread (slower at the daemon size)',
};

function includeDirs() {
  const dirs = [];
  try {
    dirs.push(createRequire(import.meta.url)('node-api-headers').include_dir);
  } catch {}
  dirs.push('/usr/include/node', join(dirname(process.execPath), '../include/node'));
  return dirs.filter((d) => existsSync(join(d, 'node_api.h')));
}

const addons = readdirSync(join(root, 'native'), { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(join(root, 'native', e.name, `${e.name}.c`)))
  .map((e) => e.name)
  .sort();
const include = includeDirs()[0];
if (process.platform !== 'linux') {
  console.log(`# ${addons.join(', ')}: not Linux, skipped (podvol needs Linux)`);
  process.exit(0);
}
if (!include) {
  console.warn(
    `# ${addons.join(', ')}: no node_api.h found (npm ci installs node-api-headers); ${addons.map((a) => without[a] ?? 'not built').join('; ')}`,
  );
  process.exit(0);
}
const cc = process.env.CC || 'cc';
for (const name of addons) {
  const src = join(root, 'native', name, `${name}.c`);
  const out = join(root, 'native', name, 'build', `${name}.node`);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp`;
  const r = spawnSync(cc, ['-O2', '-Wall', '-fPIC', '-shared', '-I', include, '-o', tmp, src], {
    stdio: 'inherit',
    timeout: 120_000,
  });
  if (r.error || r.status !== 0) {
    console.warn(
      `# ${name}: ${cc} failed (${r.error?.message ?? `exit ${r.status}`}); install a C compiler (Debian: gcc) and run npm rebuild; until then ${without[name] ?? 'it is missing'}`,
    );
    continue;
  }
  renameSync(tmp, out);
  console.log(`# ${name}: built ${out}`);
}
