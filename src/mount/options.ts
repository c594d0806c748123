// Hygiene for everything that ends up on a mount command line. Options can come
// from pod and PV specs, so each one is checked on its own (a ',' inside a value
// would smuggle in more options, CVE-2026-6437) and against a per-filesystem
// allowlist, never a denylist. Nothing here runs a process.
import { MountOptionError, type OptionProblem } from './errors.ts';
import type { MountCallOptions } from './types.ts';

/** How an option's value is checked: no value, any (already sanitized) value, a pattern, or a fixed set. */
export type ValueRule = 'flag' | 'any' | RegExp | readonly string[];
export type OptionTable = Readonly<Record<string, ValueRule>>;

/** Where options come from: our own code, or a pod/PV spec (stricter). */
export type OptionTrust = 'internal' | 'user';

const NUM = /^[0-9]+$/;
const SIZE = /^[0-9]+[kKmMgGtTpPeE]?$/;
const SIZE_OR_PERCENT = /^[0-9]+([kKmMgGtTpPeE]|%)?$/;
const MODE = /^0?[0-7]{3,4}$/;
const HOST = /^[0-9A-Za-z.:%[\]_-]+$/;

/** Per-mount flags every filesystem accepts. */
const GENERIC: OptionTable = {
  ro: 'flag',
  rw: 'flag',
  nosuid: 'flag',
  suid: 'flag',
  nodev: 'flag',
  dev: 'flag',
  noexec: 'flag',
  exec: 'flag',
  noatime: 'flag',
  atime: 'flag',
  relatime: 'flag',
  norelatime: 'flag',
  strictatime: 'flag',
  nostrictatime: 'flag',
  nodiratime: 'flag',
  diratime: 'flag',
  lazytime: 'flag',
  nolazytime: 'flag',
  sync: 'flag',
  async: 'flag',
  dirsync: 'flag',
  bind: 'flag',
  rbind: 'flag',
  remount: 'flag',
  _netdev: 'flag',
};

/**
 * Options a pod or PV spec may not ask for: privilege upgrades on a mount the
 * agent owns, and the mechanics the mounter itself drives.
 */
const USER_FORBIDDEN: ReadonlySet<string> = new Set(['suid', 'dev', 'exec', 'bind', 'rbind', 'remount']);

const TMPFS: OptionTable = {
  size: SIZE_OR_PERCENT,
  nr_blocks: SIZE,
  nr_inodes: SIZE_OR_PERCENT,
  mode: MODE,
  uid: NUM,
  gid: NUM,
  noswap: 'flag',
  huge: ['never', 'always', 'within_size', 'advise', 'deny', 'force'],
  mpol: /^(default|prefer|bind|interleave|local)(=(static|relative))?(:[0-9-]+)?$/,
  inode32: 'flag',
  inode64: 'flag',
};

const HUGETLBFS: OptionTable = {
  // kubelet passes resource quantities such as 2Mi or 1Gi.
  pagesize: /^[0-9]+[kKmMgG]?i?$/,
  size: SIZE_OR_PERCENT,
  min_size: SIZE_OR_PERCENT,
  nr_inodes: SIZE,
  uid: NUM,
  gid: NUM,
  mode: MODE,
};

const NFS: OptionTable = {
  vers: /^[234](\.[0-2])?$/,
  nfsvers: /^[234](\.[0-2])?$/,
  minorversion: NUM,
  proto: ['tcp', 'udp', 'rdma', 'tcp6', 'udp6', 'rdma6'],
  mountproto: ['tcp', 'udp', 'tcp6', 'udp6'],
  port: NUM,
  mountport: NUM,
  mountvers: NUM,
  timeo: NUM,
  retrans: NUM,
  retry: NUM,
  rsize: NUM,
  wsize: NUM,
  acregmin: NUM,
  acregmax: NUM,
  acdirmin: NUM,
  acdirmax: NUM,
  actimeo: NUM,
  nconnect: NUM,
  max_connect: NUM,
  namlen: NUM,
  sec: /^(sys|none|krb5|krb5i|krb5p)(:(sys|none|krb5|krb5i|krb5p))*$/,
  lookupcache: ['all', 'none', 'pos', 'positive'],
  local_lock: ['none', 'all', 'flock', 'posix'],
  xprtsec: ['none', 'tls', 'mtls'],
  addr: HOST,
  clientaddr: HOST,
  mounthost: HOST,
  hard: 'flag',
  soft: 'flag',
  softerr: 'flag',
  intr: 'flag',
  nointr: 'flag',
  ac: 'flag',
  noac: 'flag',
  cto: 'flag',
  nocto: 'flag',
  lock: 'flag',
  nolock: 'flag',
  sharecache: 'flag',
  nosharecache: 'flag',
  resvport: 'flag',
  noresvport: 'flag',
  fsc: 'flag',
  nofsc: 'flag',
  rdirplus: 'flag',
  nordirplus: 'flag',
  bg: 'flag',
  fg: 'flag',
  tcp: 'flag',
  udp: 'flag',
};

const EXT4: OptionTable = {
  errors: ['continue', 'remount-ro', 'panic'],
  data: ['journal', 'ordered', 'writeback'],
  commit: NUM,
  stripe: NUM,
  resuid: NUM,
  resgid: NUM,
  inode_readahead_blks: NUM,
  discard: 'flag',
  nodiscard: 'flag',
  barrier: /^[01]$/,
  nobarrier: 'flag',
  acl: 'flag',
  noacl: 'flag',
  user_xattr: 'flag',
  nouser_xattr: 'flag',
  delalloc: 'flag',
  nodelalloc: 'flag',
  noload: 'flag',
  journal_checksum: 'flag',
  nojournal_checksum: 'flag',
  auto_da_alloc: 'flag',
  noauto_da_alloc: 'flag',
  dax: 'flag',
  quota: 'flag',
  noquota: 'flag',
  usrquota: 'flag',
  grpquota: 'flag',
  prjquota: 'flag',
  grpid: 'flag',
  nogrpid: 'flag',
};

const XFS: OptionTable = {
  logbufs: NUM,
  logbsize: SIZE,
  allocsize: SIZE,
  sunit: NUM,
  swidth: NUM,
  discard: 'flag',
  nodiscard: 'flag',
  nouuid: 'flag',
  norecovery: 'flag',
  inode32: 'flag',
  inode64: 'flag',
  largeio: 'flag',
  nolargeio: 'flag',
  wsync: 'flag',
  attr2: 'flag',
  noattr2: 'flag',
  dax: 'flag',
  filestreams: 'flag',
  noquota: 'flag',
  quota: 'flag',
  uquota: 'flag',
  usrquota: 'flag',
  gquota: 'flag',
  grpquota: 'flag',
  pquota: 'flag',
  prjquota: 'flag',
};

const FS_OPTIONS: Readonly<Record<string, OptionTable>> = {
  tmpfs: TMPFS,
  ramfs: { mode: MODE },
  hugetlbfs: HUGETLBFS,
  nfs: NFS,
  nfs4: NFS,
  ext2: EXT4,
  ext3: EXT4,
  ext4: EXT4,
  xfs: XFS,
};

/** Shown instead of a sensitive option in problems, logs and errors. */
export const MASKED = '<masked>';

export interface CheckOptions {
  /** 'user' (pod/PV spec) also forbids suid, dev, exec, bind, rbind and remount. Default 'internal'. */
  trust?: OptionTrust;
  /** Options are secrets: problems name them as `<masked>`. */
  sensitive?: boolean;
  /** Extra allowed names for this call: a plain list (any value) or a table with rules. */
  extraAllowed?: readonly string[] | OptionTable;
}

/** The allowlist for `fstype`: generic flags plus the filesystem's own options. */
export function allowedOptions(fstype: string): OptionTable {
  return { ...GENERIC, ...(FS_OPTIONS[fstype] ?? {}) };
}

function basicProblem(s: string): string | undefined {
  if (s === '') return 'is empty';
  if (s.includes(',')) return "contains ',' which would split it into several mount options";
  if (s.startsWith('-')) return "starts with '-' and would be read as a command-line flag";
  if (s.includes('\n') || s.includes('\r')) return 'contains a newline';
  if (s.includes('\0')) return 'contains a NUL byte';
  if (/[\x00-\x1f\x7f]/.test(s)) return 'contains a control character';
  return undefined;
}

function valueProblem(name: string, value: string | undefined, rule: ValueRule): string | undefined {
  if (rule === 'flag') return value === undefined ? undefined : `${name} takes no value`;
  if (value === undefined || value === '') return `${name} needs a value`;
  if (value.startsWith('-')) return "value starts with '-'";
  if (rule === 'any') return undefined;
  if (rule instanceof RegExp) return rule.test(value) ? undefined : `value is not valid for ${name}`;
  return rule.includes(value) ? undefined : `${name} must be one of ${rule.join(', ')}`;
}

/** Every problem with `options` for `fstype`; an empty list means they may be used. */
// Array.isArray does not narrow a readonly array out of a union (TypeScript #17002).
function isNameList(x: readonly string[] | OptionTable): x is readonly string[] {
  return Array.isArray(x);
}

export function checkMountOptions(
  fstype: string,
  options: readonly string[],
  opts: CheckOptions = {},
): OptionProblem[] {
  const extraAllowed = opts.extraAllowed ?? {};
  const extra: OptionTable = isNameList(extraAllowed)
    ? Object.fromEntries(extraAllowed.map((n) => [n, 'any' as const]))
    : extraAllowed;
  const table: OptionTable = { ...allowedOptions(fstype), ...extra };
  const problems: OptionProblem[] = [];
  for (const option of options) {
    const shown = opts.sensitive ? MASKED : option;
    const basic = basicProblem(option);
    if (basic) {
      problems.push({ option: shown, problem: basic });
      continue;
    }
    const eq = option.indexOf('=');
    const name = eq === -1 ? option : option.slice(0, eq);
    const value = eq === -1 ? undefined : option.slice(eq + 1);
    if (opts.trust === 'user' && USER_FORBIDDEN.has(name)) {
      problems.push({ option: shown, problem: `${name} may not be requested by a pod or volume spec` });
      continue;
    }
    const rule = Object.hasOwn(table, name) ? table[name] : undefined;
    if (rule === undefined) {
      problems.push({
        option: shown,
        problem: `${opts.sensitive ? 'option' : name} is not an allowed option for fstype ${JSON.stringify(fstype || '(none)')}`,
      });
      continue;
    }
    const bad = valueProblem(name, value, rule);
    if (bad) problems.push({ option: shown, problem: opts.sensitive ? 'value is not valid' : bad });
  }
  return problems;
}

/** Throws MountOptionError listing every bad option. */
export function validateMountOptions(
  fstype: string,
  options: readonly string[],
  opts: CheckOptions = {},
): void {
  const problems = checkMountOptions(fstype, options, opts);
  if (problems.length > 0) throw new MountOptionError(fstype, problems);
}

/**
 * For plugins: validates mount options taken from a pod or PV spec (for example
 * `PersistentVolume.spec.mountOptions`) before passing them to a Mounter.
 */
export function validateUserMountOptions(
  fstype: string,
  options: readonly string[],
  extraAllowed?: CheckOptions['extraAllowed'],
): void {
  validateMountOptions(fstype, options, { trust: 'user', extraAllowed });
}

/** Flags a caller may put before -t/-o (MountCallOptions.mountFlags). */
const ALLOWED_MOUNT_FLAGS: ReadonlySet<string> = new Set(['--no-canonicalize', '-n', '--no-mtab']);

const FSTYPE = /^[A-Za-z0-9][A-Za-z0-9._+-]*$/;

export interface MountRequestParts {
  source: string;
  target: string;
  fstype: string;
  mountFlags?: readonly string[];
}

/** Problems with the non-option parts of a mount command line. */
export function checkMountArguments(parts: MountRequestParts): OptionProblem[] {
  const problems: OptionProblem[] = [];
  const { source, target, fstype } = parts;
  if (!target.startsWith('/')) problems.push({ option: target, problem: 'target must be an absolute path' });
  if (target.includes('\0')) problems.push({ option: target, problem: 'target contains a NUL byte' });
  if (source.startsWith('-')) {
    problems.push({
      option: source,
      problem: "source starts with '-' and would be read as a command-line flag",
    });
  }
  if (source.includes('\0')) problems.push({ option: source, problem: 'source contains a NUL byte' });
  if (fstype !== '' && !FSTYPE.test(fstype))
    problems.push({ option: fstype, problem: 'not a valid filesystem type' });
  for (const flag of parts.mountFlags ?? []) {
    if (!ALLOWED_MOUNT_FLAGS.has(flag)) {
      problems.push({
        option: flag,
        problem: `mount flag not allowed (allowed: ${[...ALLOWED_MOUNT_FLAGS].join(', ')})`,
      });
    }
  }
  return problems;
}

/**
 * Every check a mount call gets before anything runs, for the real mounter and
 * the fake alike (so a test that passes against the fake would pass against
 * mount(8)): the command line's parts, the options, the sensitive options.
 * Throws MountOptionError listing every problem.
 */
export function validateMountRequest(
  source: string,
  target: string,
  fstype: string,
  options: readonly string[],
  call: MountCallOptions,
): void {
  const problems: OptionProblem[] = [
    ...checkMountArguments({ source, target, fstype, mountFlags: call.mountFlags }),
    ...checkMountOptions(fstype, options),
    ...checkMountOptions(fstype, call.sensitiveOptions ?? [], { sensitive: true }),
  ];
  if (problems.length > 0) throw new MountOptionError(fstype, problems);
}

/** Checks a target path given to umount the same way. */
export function checkUnmountTarget(target: string): OptionProblem[] {
  const problems: OptionProblem[] = [];
  if (!target.startsWith('/')) problems.push({ option: target, problem: 'target must be an absolute path' });
  if (target.includes('\0')) problems.push({ option: target, problem: 'target contains a NUL byte' });
  return problems;
}
