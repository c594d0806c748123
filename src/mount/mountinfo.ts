// /proc/self/mountinfo: parsing, consistent reading, and the lookups the
// mounters need (is this path a mount point, which mounts share its root).
// Line format (proc(5)):
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
// Paths, fstype and source are escaped by the kernel as \ooo for space, tab,
// newline and backslash, so a line never contains a raw newline.
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { MountInfoError } from './errors.ts';
import type { MountInfo } from './types.ts';

export const PROC_MOUNTINFO = '/proc/self/mountinfo';

/** What d_path appends to a mount point whose root dentry was unlinked, as printed (escaped). */
const DELETED_SUFFIX = '\\040(deleted)';
const DELETED_SUFFIX_UNESCAPED = ' (deleted)';

function isOctal(c: number): boolean {
  return c >= 48 && c <= 55;
}

/** Replaces \ooo octal escapes. Escapes above 0x7f are bytes of UTF-8 text, decoded as such. */
export function unescapeOctal(s: string): string {
  let i = s.indexOf('\\');
  if (i === -1) return s;
  let out = '';
  let last = 0;
  let highByte = false;
  for (; i !== -1; i = s.indexOf('\\', i + 1)) {
    if (
      i + 3 < s.length &&
      isOctal(s.charCodeAt(i + 1)) &&
      isOctal(s.charCodeAt(i + 2)) &&
      isOctal(s.charCodeAt(i + 3))
    ) {
      const code =
        (s.charCodeAt(i + 1) - 48) * 64 + (s.charCodeAt(i + 2) - 48) * 8 + (s.charCodeAt(i + 3) - 48);
      if (code > 0x7f) highByte = true;
      out += s.slice(last, i) + String.fromCharCode(code);
      last = i + 4;
      i += 3;
    }
  }
  out += s.slice(last);
  return highByte ? recodeBytes(s) : out;
}

/** Slow path for escaped non-ASCII bytes: literal text is UTF-8, each escape one byte. */
function recodeBytes(s: string): string {
  const bytes: number[] = [];
  const re = /\\([0-7]{3})/g;
  let last = 0;
  for (let m = re.exec(s); m !== null; m = re.exec(s)) {
    for (const b of Buffer.from(s.slice(last, m.index), 'utf8')) bytes.push(b);
    bytes.push(Number.parseInt(m[1] ?? '', 8) & 0xff);
    last = m.index + m[0].length;
  }
  for (const b of Buffer.from(s.slice(last), 'utf8')) bytes.push(b);
  return Buffer.from(bytes).toString('utf8');
}

function parseIntField(text: string, start: number, end: number, what: string, lineNo: number): number {
  if (start >= end) throw badLine(lineNo, `empty ${what}`);
  let n = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i) - 48;
    if (c < 0 || c > 9)
      throw badLine(lineNo, `${what} is not a number: ${JSON.stringify(text.slice(start, end))}`);
    n = n * 10 + c;
  }
  return n;
}

function badLine(lineNo: number, why: string): MountInfoError {
  return new MountInfoError(`mountinfo line ${lineNo}: ${why}`);
}

const NO_FIELDS: readonly string[] = Object.freeze([]);

/**
 * Option fields repeat across a mount table (every secret's tmpfs, every bind
 * of the same disk print the same text), and splitting them was a quarter of
 * the parse. One parse shares one frozen list per distinct text. The first
 * few distinct texts are compared directly (cheaper than hashing the text
 * for a map: measured 0.9 against 1.5 ms per 10,000 lines); the rest go
 * through a map. Both live only as long as that parse.
 */
interface OptionLists {
  recent: { text: string; list: readonly string[] }[];
  byText: Map<string, readonly string[]>;
}

const RECENT_OPTION_TEXTS = 8;

function newOptionLists(): OptionLists {
  return { recent: [], byText: new Map() };
}

/** The options in text[start, end), split on ','. */
function splitOptions(text: string, start: number, end: number, seen: OptionLists): readonly string[] {
  if (start === end) return NO_FIELDS;
  const field = text.slice(start, end);
  for (const r of seen.recent) if (r.text === field) return r.list;
  let list = seen.byText.get(field);
  if (list === undefined) {
    const parts = field.split(',');
    // Filesystems print option values with seq_show_option, which escapes ',' too.
    if (field.indexOf('\\') !== -1) {
      for (const [i, o] of parts.entries()) parts[i] = unescapeOctal(o);
    }
    list = Object.freeze(parts);
    if (seen.recent.length < RECENT_OPTION_TEXTS) seen.recent.push({ text: field, list });
    else seen.byText.set(field, list);
  }
  return list;
}

/**
 * End of the number field starting at `pos` when its digits are followed by
 * `stop` (or the line end); otherwise the end of the space-separated field,
 * for parseIntField to name. Numbers are a few digits, where this loop beats
 * a call into indexOf.
 */
function numberEnd(text: string, pos: number, end: number, stop: number): number {
  let i = pos;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) break;
    i++;
  }
  if (i >= end) return end;
  return text.charCodeAt(i) === stop ? i : fieldEnd(text, i, end);
}

/** End of the space-separated field starting at `pos` (the line end if it is the last one). */
function fieldEnd(text: string, pos: number, end: number): number {
  const sp = text.indexOf(' ', pos);
  return sp === -1 || sp > end ? end : sp;
}

function tooFew(text: string, start: number, end: number, lineNo: number): MountInfoError {
  return badLine(
    lineNo,
    `wrong number of fields (expected at least 10): ${JSON.stringify(text.slice(start, end))}`,
  );
}

/**
 * One line, text[start, end). `escaped` says whether the line holds a
 * backslash at all: most lines have none, and then no field is decoded.
 */
function parseLine(
  text: string,
  start: number,
  end: number,
  lineNo: number,
  escaped: boolean,
  seen: OptionLists,
): MountInfo {
  // Fields 1..6 are fixed: ID, parent ID, major:minor, root, mount point, mount options.
  const e1 = numberEnd(text, start, end, 32);
  const e2 = numberEnd(text, e1 + 1, end, 32);
  let colon = numberEnd(text, e2 + 1, end, 58 /* : */);
  let e3: number;
  if (colon < end && text.charCodeAt(colon) === 58) {
    e3 = numberEnd(text, colon + 1, end, 32);
  } else {
    // Not digits then ':': find the field and its colon the long way, so the error names the part.
    e3 = fieldEnd(text, e2 + 1, end);
    colon = text.indexOf(':', e2 + 1);
    if (colon === -1) colon = end;
  }
  const e4 = fieldEnd(text, e3 + 1, end);
  const e5 = fieldEnd(text, e4 + 1, end);
  const e6 = fieldEnd(text, e5 + 1, end);
  if (e6 >= end) throw tooFew(text, start, end, lineNo);
  const id = parseIntField(text, start, e1, 'mount ID', lineNo);
  const parentId = parseIntField(text, e1 + 1, e2, 'parent ID', lineNo);
  if (colon >= e3) throw badLine(lineNo, 'major:minor has no colon');
  const major = parseIntField(text, e2 + 1, colon, 'major', lineNo);
  const minor = parseIntField(text, colon + 1, e3, 'minor', lineNo);
  let root = text.slice(e3 + 1, e4);
  let mountPoint = text.slice(e4 + 1, e5);
  let deleted = false;
  if (escaped) {
    root = unescapeOctal(root);
    if (mountPoint.endsWith(DELETED_SUFFIX)) {
      deleted = true;
      mountPoint = mountPoint.slice(0, -DELETED_SUFFIX.length);
    }
    mountPoint = unescapeOctal(mountPoint);
  }
  const mountOptions = splitOptions(text, e5 + 1, e6, seen);

  // Optional fields (shared:N, master:N, ...) run up to a field that is exactly "-".
  let optionalFields: string[] | undefined;
  let pos = e6 + 1;
  for (;;) {
    if (pos >= end) throw badLine(lineNo, 'no "-" separator before the filesystem type');
    const fe = fieldEnd(text, pos, end);
    if (fe === pos + 1 && text.charCodeAt(pos) === 45 /* - */) {
      pos = fe + 1;
      break;
    }
    if (optionalFields === undefined) optionalFields = [text.slice(pos, fe)];
    else optionalFields.push(text.slice(pos, fe));
    pos = fe + 1;
  }
  // fstype, source, super options; anything a future kernel appends is ignored.
  if (pos > end) throw tooFew(text, start, end, lineNo);
  const t1 = fieldEnd(text, pos, end);
  if (t1 >= end) throw tooFew(text, start, end, lineNo);
  const t2 = fieldEnd(text, t1 + 1, end);
  if (t2 >= end) throw tooFew(text, start, end, lineNo);
  const t3 = fieldEnd(text, t2 + 1, end);
  let fsType = text.slice(pos, t1);
  let source = text.slice(t1 + 1, t2);
  if (escaped) {
    fsType = unescapeOctal(fsType);
    source = unescapeOctal(source);
  }
  const info: MountInfo = {
    id,
    parentId,
    major,
    minor,
    root,
    mountPoint,
    mountOptions,
    optionalFields: optionalFields ?? NO_FIELDS,
    fsType,
    source,
    superOptions: splitOptions(text, t2 + 1, t3, seen),
  };
  if (deleted) info.deleted = true;
  return info;
}

/** Parses the text of a mountinfo file. Throws MountInfoError naming the first bad line. */
export function parseMountInfo(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  const len = text.length;
  let pos = 0;
  let lineNo = 0;
  const seen = newOptionLists();
  // The next backslash in the text, found once and not per line: searching
  // from each line would scan the rest of an escape-free table every time.
  // With none (most tables), it is the text's length: measured, comparing with -1 on every line
  // made the parse quadratic in V8 (900 lines 80 ms instead of 5, 1,900 lines 290 ms instead of 13).
  let backslash = text.indexOf('\\');
  if (backslash === -1) backslash = len;
  while (pos < len) {
    let end = text.indexOf('\n', pos);
    if (end === -1) end = len;
    lineNo++;
    if (backslash < pos) {
      backslash = text.indexOf('\\', pos);
      if (backslash === -1) backslash = len;
    }
    const escaped = backslash < end;
    if (end > pos) out.push(parseLine(text, pos, end, lineNo, escaped, seen));
    pos = end + 1;
  }
  return out;
}

export type TextReader = (path: string) => Promise<string>;

const readText: TextReader = (path) => readFile(path, 'utf8');

/**
 * Reads a /proc file until two consecutive reads agree. A large mountinfo is
 * produced in several read() calls, and mounts changing in between can tear
 * the result (mount-utils ConsistentRead, needed before Linux 5.8).
 */
export async function consistentRead(
  path: string,
  reader: TextReader = readText,
  maxAttempts = 10,
): Promise<string> {
  let previous = await reader(path);
  for (let attempt = 1; attempt < maxAttempts; attempt++) {
    const current = await reader(path);
    if (current === previous) return current;
    previous = current;
  }
  throw new MountInfoError(`could not get consistent content of ${path} after ${maxAttempts} attempts`);
}

/** The current mount table of this process. */
export async function readMountInfo(
  path: string = PROC_MOUNTINFO,
  reader?: TextReader,
): Promise<MountInfo[]> {
  return parseMountInfo(await consistentRead(path, reader));
}

/** Does `entry` describe a mount at `path`? A `(deleted)` entry matches with and without the suffix. */
export function mountPointMatches(entry: MountInfo, path: string): boolean {
  if (entry.mountPoint === path) return true;
  return entry.deleted === true && entry.mountPoint + DELETED_SUFFIX_UNESCAPED === path;
}

/** Is the absolute, symlink-free `path` a mount point in `infos`? */
export function isMountPointIn(infos: readonly MountInfo[], path: string): boolean {
  return infos.some((e) => mountPointMatches(e, path));
}

function isWithin(path: string, base: string): boolean {
  if (base === '/') return path.startsWith('/');
  return path === base || path.startsWith(base + '/');
}

/**
 * The mount that `path` lives on. Searched from the end because a later mount
 * covers earlier ones on the same or a parent path.
 */
export function mountContaining(infos: readonly MountInfo[], path: string): MountInfo | undefined {
  return infos.findLast((m) => isWithin(path, m.mountPoint));
}

/**
 * Other mount points showing the same directory of the same filesystem as
 * `path` (its bind mounts), as mount-utils SearchMountPoints: same
 * major:minor and same root, excluding the mount `path` itself is on.
 */
export function searchMountRefs(infos: readonly MountInfo[], path: string): string[] {
  const own = mountContaining(infos, path);
  if (!own) throw new MountInfoError(`failed to get root path and major:minor for ${path}`);
  const rel = own.mountPoint === '/' ? path : path.slice(own.mountPoint.length);
  const rootPath = posix.join(own.root, rel);
  const refs: string[] = [];
  for (const e of infos) {
    if (e.id === own.id) continue;
    if (e.root === rootPath && e.major === own.major && e.minor === own.minor) refs.push(e.mountPoint);
  }
  return refs;
}
