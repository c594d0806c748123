// `npm run lint` runs this after the module-state check: code reaches the host
// through its seams only (issue 23) — files through the volume host's FsOps
// (src/volumehost/fs.ts), processes through the mount layer's runner
// (src/mount/exec.ts), time through a Clock (src/clock.ts) — so that tests and
// `podvol plan` see every call the daemon's code makes. Refused outside the
// files listed below:
//
//   - a value import (or re-export, or dynamic import) of node:fs,
//     node:fs/promises, node:child_process, node:timers or node:timers/promises
//     (bare `fs` and friends too); `import type` reaches nothing and passes;
//   - a call of the global setTimeout or setInterval (a method of the same
//     name, `socket.setTimeout(...)`, is not the global).
//
// Comments and strings are blanked first (check-layers.mjs' scanner), so a
// mention in either is no use.
//
// Usage: node scripts/check-host-seam.mjs [src-dir]   (default: src of this repo)
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { blank, sourceFiles } from './check-layers.mjs';

/**
 * The seams' implementations and what is not volume work, each with its
 * reason. An entry ending in `/` covers a directory. Keep it short: an entry
 * that is volume work is a to-do, not a licence (and one whose file no longer
 * needs it fails the check).
 */
const ALLOWED = new Map([
  ['volumehost/fs.ts', 'the volume host fs seam itself: FsOps over node:fs'],
  ['clock.ts', 'the Clock seam itself: the system clock over setTimeout/setInterval'],
  [
    'mount/',
    'the mounter seam (mount.Interface) and its runner (exec.ts, execa with timeouts): the layer below volumehost, which cannot use its fs',
  ],
  [
    'agent/ops/plan-fs.ts',
    "plan's recording fs: reads the host it overlays (never writes), as the daemon's FsOps would",
  ],
  [
    'volumehost/host.ts',
    "the node's allocatable (statfs of the root) for the standalone node object: host facts, not volume work",
  ],
  [
    'volumehost/selinux-host.ts',
    'the host SELinux check (selinuxfs, a process label): host facts, read once',
  ],
  ['volumehost/kube/config.ts', 'the kubeconfig and in-cluster credentials: API access, not volume work'],
  ['agent/access/', 'TLS serving certificates and their reload timers: the HTTPS listener, not volume work'],
  [
    'agent/runtime/',
    "the container runtime's socket, its peer-credential group and its state files: the runtime API listener, not volume work",
  ],
  [
    'agent/connection-budget.ts',
    "the listeners' fd budget (/proc limits) and its timers: network, not volume work",
  ],
  [
    'agent/root-lock.ts',
    "the root directory's lock socket (one daemon per root): a listener, not volume work",
  ],
  [
    'agent/start-up.ts',
    "the bound on closing what a failed start opened: the process's life, not volume work",
  ],
  [
    'cli/config-file.ts',
    'the config file (--config), read once before anything starts: configuration, not volume work',
  ],
  [
    'cli/plan.ts',
    "plan's manifest path (-f), checked before it is read as the pod source reads it: input, not volume work",
  ],
  [
    'cli/wait.ts',
    "`podvol wait`'s pause between its questions to a running daemon: a client, not volume work",
  ],
  [
    'agent/plugin-watcher.ts',
    "the plugin registry: CSI drivers' registration sockets and their directory watch (fs.watch, which FsOps has no equivalent for): registration, not volume work; its timer is on a Clock",
  ],
  [
    'agent/pods/static-source.ts',
    'the static pod manifests and their directory watch (fs.watch): pod configuration, not volume work; its reads take an injected ManifestFs, its timers a Clock',
  ],
]);

const MODULES = '(?:node:)?(?:fs|fs/promises|child_process|timers|timers/promises)';
/** `import x from 'm'`, `import {…} from 'm'`, `export … from 'm'`, `import 'm'`, `import('m')`, `require('m')`. */
const IMPORT = new RegExp(
  String.raw`\b(?:(import|export)\s+(type\s+)?[^;'"]*?\bfrom\s*|import\s*|import\s*\(\s*|require\s*\(\s*)(['"])${MODULES}\3`,
  'g',
);
const TIMER = /(^|[^.\w$])(setTimeout|setInterval)\s*\(/g;

const lineOf = (text, index) => text.slice(0, index).split('\n').length;

// The problems of one file's source, each `line: what`.
export function hostAccessOf(source) {
  const text = blank(source);
  const problems = [];
  // Module names are strings, blanked in `text`: matched in the source, kept if the keyword is code.
  for (const m of source.matchAll(IMPORT)) {
    if (text.slice(m.index, m.index + 6) !== source.slice(m.index, m.index + 6)) continue;
    if (m[2] !== undefined) continue; // import type / export type
    problems.push(`${lineOf(source, m.index)}: imports ${m[0].match(/['"]([^'"]+)['"]/)?.[1]}`);
  }
  for (const m of text.matchAll(TIMER)) {
    problems.push(`${lineOf(text, m.index + m[1].length)}: calls the global ${m[2]} (take a Clock)`);
  }
  return problems;
}

const allowedEntry = (from, allowed) =>
  [...allowed.keys()].find((k) => (k.endsWith('/') ? from.startsWith(k) : from === k));

// The violations in srcDir, each a line naming the file, the line and the rule.
export function checkHostSeam(srcDir, allowed = ALLOWED) {
  const problems = [];
  const used = new Set();
  for (const file of sourceFiles(srcDir).sort()) {
    const from = relative(srcDir, file);
    const found = hostAccessOf(readFileSync(file, 'utf8'));
    const entry = allowedEntry(from, allowed);
    if (entry === undefined) for (const p of found) problems.push(`${from}:${p}`);
    else if (found.length > 0) used.add(entry);
  }
  // An entry outlives its reason unnoticed otherwise.
  for (const k of allowed.keys())
    if (!used.has(k))
      problems.push(`${k}: allowed in check-host-seam.mjs but reaches no host directly: drop it`);
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const srcDir = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '../src'));
  const problems = checkHostSeam(srcDir, process.argv[2] === undefined ? ALLOWED : new Map());
  for (const p of problems) console.error(p);
  if (problems.length > 0) {
    console.error(
      `check-host-seam: ${problems.length} problem(s): reach the host through the volume host's fs, the mounter's runner or a Clock`,
    );
    process.exit(1);
  }
}
