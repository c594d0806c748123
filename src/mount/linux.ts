// The real mounter: runs mount(8)/umount(8) through the injectable runner and
// reads /proc/self/mountinfo. Modelled on kubernetes/mount-utils mount_linux.go
// and mount_helper_common.go.
import { access, lstat, realpath, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { type Logger, silentLogger } from '../logger.ts';
import {
  isCorruptedMountError,
  isNotExistError,
  MountError,
  MountOptionError,
  mountPointMissing,
} from './errors.ts';
import { type CommandRunner, createRunner, type RunResult } from './exec.ts';
import { findMountHolders, formatHolders } from './holders.ts';
import { MountTable, type WatchMounts } from './mount-table.ts';
import { isMountPointIn, mountContaining, PROC_MOUNTINFO, searchMountRefs } from './mountinfo.ts';
import { checkUnmountTarget, MASKED, validateMountRequest } from './options.ts';
import { pathExists } from './probe.ts';
import { detectSystemd, wrapInScope } from './systemd.ts';
import { realTargets, type TargetHandle, type TargetOpener } from './target.ts';
import type { Interface, MountCallOptions, MountInfo, UnmountOutcome } from './types.ts';

/** The file system calls the mounter makes; injectable to simulate broken mounts (e.g. ENOTCONN). */
export interface MounterFs {
  lstat(path: string): Promise<{ dev: number; isSymbolicLink(): boolean }>;
  stat(path: string): Promise<unknown>;
  access(path: string): Promise<void>;
  realpath(path: string): Promise<string>;
}

export interface LinuxMounterOptions {
  /** 'auto' wraps mounts in `systemd-run --scope` when systemd is PID 1 and the probe works; 'off' never does. */
  systemd?: 'auto' | 'off';
  logger?: Logger;
  runner?: CommandRunner;
  /** Deadline for every mount/umount/probe command. Default 2 minutes. */
  commandTimeoutMs?: number;
  mountInfoPath?: string;
  /** How changes of the mount table are noticed (mount-table.ts); default the native addon, with a read per list() without it. */
  watchMounts?: WatchMounts;
  fs?: Partial<MounterFs>;
  /** Where to look for systemd; tests point it elsewhere. */
  systemdRuntimeDir?: string;
  /** How mount and unmount targets are opened (target.ts); simulated tests pass `pathTargets`. */
  targets?: TargetOpener;
}

const DEFAULT_TIMEOUT_MS = 120_000;
/** Mount flags of the bind source that the remount must keep (mount-utils bind remount). */
const INHERITED_BIND_FLAGS = ['ro', 'nodev', 'noexec', 'nosuid', 'noatime', 'relatime', 'nodiratime'];

/** Replaces sensitive options, and their bare values, wherever they appear in `text`. */
export function maskSensitive(text: string, sensitive: readonly string[]): string {
  let out = text;
  for (const opt of sensitive) {
    if (opt !== '') out = out.split(opt).join(MASKED);
  }
  for (const opt of sensitive) {
    const eq = opt.indexOf('=');
    const value = eq === -1 ? '' : opt.slice(eq + 1);
    if (value !== '') out = out.split(value).join(MASKED);
  }
  return out;
}

export class LinuxMounter implements Interface {
  readonly #run: CommandRunner;
  readonly #log: Logger;
  readonly #timeoutMs: number;
  readonly #mountTable: MountTable;
  readonly #fs: MounterFs;
  readonly #systemdMode: 'auto' | 'off';
  readonly #systemdRuntimeDir: string | undefined;
  readonly #targets: TargetOpener;
  #systemd: Promise<boolean> | undefined;

  constructor(opts: LinuxMounterOptions = {}) {
    this.#run = opts.runner ?? createRunner();
    this.#log = opts.logger ?? silentLogger();
    this.#timeoutMs = opts.commandTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#mountTable = new MountTable({
      path: opts.mountInfoPath ?? PROC_MOUNTINFO,
      ...(opts.watchMounts ? { watch: opts.watchMounts } : {}),
    });
    this.#fs = { lstat, stat, access, realpath, ...opts.fs };
    this.#systemdMode = opts.systemd ?? 'auto';
    this.#systemdRuntimeDir = opts.systemdRuntimeDir;
    this.#targets = opts.targets ?? realTargets;
  }

  /** Whether mounts get wrapped in `systemd-run --scope`; probed once per mounter. */
  systemdAvailable(): Promise<boolean> {
    if (this.#systemdMode === 'off') return Promise.resolve(false);
    this.#systemd ??= detectSystemd({
      runner: this.#run,
      timeoutMs: this.#timeoutMs,
      logger: this.#log,
      runtimeDir: this.#systemdRuntimeDir,
    });
    return this.#systemd;
  }

  async mount(
    source: string,
    target: string,
    fstype: string,
    options: string[],
    call: MountCallOptions = {},
  ): Promise<void> {
    const sensitive = call.sensitiveOptions ?? [];
    validateMountRequest(source, target, fstype, options, call);
    // The target goes to mount(8) as /proc/<pid>/fd/N (target.ts), which it must not resolve itself.
    const flags = [...(call.mountFlags ?? [])];
    if (!flags.includes('--no-canonicalize')) flags.unshift('--no-canonicalize');

    const systemd = !call.withoutSystemd && (await this.systemdAvailable());
    const all = [...options, ...sensitive];
    const bindKind = all.includes('rbind') ? 'rbind' : all.includes('bind') ? 'bind' : undefined;
    // The target is opened before mount(8) runs, so a missing one is reported here, as mount(8) would.
    const at = await this.#targets.open(target).catch((err: unknown) => {
      throw isNotExistError(err) ? mountPointMissing(target) : err;
    });
    let top: TargetHandle | undefined;
    try {
      if (!bindKind) {
        await this.#doMount(source, target, at.procPath, fstype, options, sensitive, flags, systemd);
        top = await this.#mountedOn(target, at);
        return;
      }

      // A bind ignores per-mount flags, so they are applied by a second, remount step.
      const first = [bindKind, ...(all.includes('_netdev') ? ['_netdev'] : [])];
      await this.#doMount(source, target, at.procPath, fstype, first, [], flags, systemd);
      top = await this.#mountedOn(target, at);
      const isMechanics = (o: string) => o === 'bind' || o === 'rbind' || o === 'remount';
      const remount = ['bind', 'remount', ...options.filter((o) => !isMechanics(o))];
      for (const flag of await this.#sourceFlags(source)) if (!remount.includes(flag)) remount.push(flag);
      try {
        // The remount acts on the new mount itself: the handle of what is mounted there now.
        await this.#doMount(
          source,
          target,
          top.procPath,
          fstype,
          remount,
          sensitive.filter((o) => !isMechanics(o)),
          flags,
          systemd,
        );
      } catch (err) {
        // Unlike mount-utils, do not leave a bind behind without the flags (say ro) the caller asked for.
        this.#log.warn({ target }, 'bind remount failed, removing the bind mount');
        // Our own handle on the new mount would keep it busy.
        await top.close();
        top = undefined;
        await this.unmount(target).catch((e: unknown) =>
          this.#log.error(
            { target, err: String(e) },
            'could not remove the bind mount after a failed remount',
          ),
        );
        throw err;
      }
    } finally {
      await top?.close();
      await at.close();
    }
  }

  /**
   * After mounting through `at`: the handle of the new mount at `target`. If
   * the path no longer leads there (the checked directory was moved, or a
   * directory on the way swapped after the mount), whatever was mounted on
   * the checked object is detached, wherever it is now, and the mount fails
   * with UnsafePath.
   */
  async #mountedOn(target: string, at: TargetHandle): Promise<TargetHandle> {
    try {
      return await this.#targets.openMounted(target, at);
    } catch (err) {
      const stray = await this.#targets.openOnTop(at).catch(() => undefined);
      if (stray) {
        this.#log.error({ target, err: String(err) }, 'mounted somewhere else than the target, detaching it');
        // Lazily: our handle on it (the only way to name it) keeps it busy.
        await this.#run({
          file: 'umount',
          args: ['-l', '--no-canonicalize', stray.procPath],
          timeoutMs: this.#timeoutMs,
        }).finally(() => stray.close());
      }
      throw err;
    }
  }

  /** Per-mount flags of the mount holding `source`, which the bind must not drop (locked flags, nosuid). */
  async #sourceFlags(source: string): Promise<string[]> {
    try {
      const own = mountContaining(await this.list(), await this.#fs.realpath(source));
      return own ? own.mountOptions.filter((o) => INHERITED_BIND_FLAGS.includes(o)) : [];
    } catch (err) {
      this.#log.debug({ source, err: String(err) }, 'cannot read the mount flags of the bind source');
      return [];
    }
  }

  /** One mount(8) run; `through` is what it gets as the target (the handle's /proc path), `target` what logs say. */
  async #doMount(
    source: string,
    target: string,
    through: string,
    fstype: string,
    options: readonly string[],
    sensitive: readonly string[],
    flags: readonly string[],
    systemd: boolean,
  ): Promise<void> {
    const build = (opts: readonly string[], at: string) => {
      const args = [...flags];
      if (fstype !== '') args.push('-t', fstype);
      if (opts.length > 0) args.push('-o', opts.join(','));
      if (source !== '') args.push(source);
      args.push(at);
      return systemd ? wrapInScope(target, 'mount', args) : { file: 'mount', args };
    };
    const real = build([...options, ...sensitive], through);
    // Logs and errors name the target, as mount-utils' do; the log adds the handle it went through.
    const shown = build([...options, ...sensitive.map(() => MASKED)], target);
    this.#log.info({ command: shown.file, args: shown.args, through }, 'Mounting');
    const res = await this.#run({ file: real.file, args: real.args, timeoutMs: this.#timeoutMs });
    if (succeeded(res)) return;
    throw new MountError({
      operation: 'mount',
      command: shown.file,
      args: shown.args,
      output: maskSensitive(res.output, sensitive),
      exitCode: res.exitCode,
      signal: res.signal,
      timedOut: res.timedOut,
      reason: failureReason(res, real.file, this.#timeoutMs),
    });
  }

  async unmount(target: string): Promise<UnmountOutcome> {
    const res = await this.#umount([], target, this.#timeoutMs);
    return this.#judgeUnmount(target, [target], res, 'unmounted');
  }

  async unmountWithForce(target: string, timeoutMs: number): Promise<UnmountOutcome> {
    const plain = await this.#umount([], target, timeoutMs);
    // Busy counts as hung here: the requests stuck in a filesystem that does not
    // answer (its stat probes included) hold it busy, and -f is what aborts them.
    // (umount(8) itself used to hang first, resolving the path; it no longer does.)
    const busy = isBusy(plain);
    if (!plain.timedOut && !busy) return this.#judgeUnmount(target, [target], plain, 'unmounted');

    this.#log.warn(
      { target, timeoutMs, busy },
      busy
        ? 'Unmount busy on an unresponsive filesystem, trying with -f'
        : 'Timed out waiting for unmount, trying with -f',
    );
    const forced = await this.#umount(['-f'], target, timeoutMs);
    if (succeeded(forced)) return 'forced';
    if (!forced.timedOut && !(await this.#stillMounted(target))) return 'unmounted';

    this.#log.warn(
      { target, output: forced.output, timedOut: forced.timedOut },
      'umount -f failed, detaching lazily',
    );
    const lazy = await this.#umount(['-l'], target, timeoutMs);
    return this.#judgeUnmount(target, ['-l', target], lazy, 'lazy');
  }

  /**
   * umount(8) with `flags` on `target`, named through a handle on its parent
   * directory (target.ts) and not canonicalised: umount(8) would otherwise
   * resolve the path itself, and stat the target, which hangs on a filesystem
   * that does not answer.
   */
  async #umount(flags: string[], target: string, timeoutMs: number): Promise<RunResult> {
    const problems = checkUnmountTarget(target);
    if (problems.length > 0) throw new MountOptionError('', problems);
    const parent = await this.#targets.openParent(target);
    try {
      const args = [...flags, '--no-canonicalize', parent.procPath];
      this.#log.info({ command: 'umount', args, target }, 'Unmounting');
      return await this.#run({ file: 'umount', args, timeoutMs });
    } finally {
      await parent.close();
    }
  }

  /**
   * Success, or "nothing is mounted there" (judged by mountinfo, not by
   * umount's wording), is fine; anything else is a MountError.
   */
  async #judgeUnmount(
    target: string,
    args: string[],
    res: RunResult,
    success: UnmountOutcome,
  ): Promise<UnmountOutcome> {
    if (succeeded(res)) return success;
    if (!res.timedOut && !(await this.#stillMounted(target))) {
      this.#log.info({ target, output: res.output }, 'Not mounted, nothing to unmount');
      return 'not-mounted';
    }
    const busy = /target is busy|device is busy/i.test(res.output);
    // kubelet only retries a busy unmount; say who holds it, so the operator can act.
    const path = await this.#mountinfoPath(target);
    const holders = busy ? await findMountHolders(path) : [];
    const below = busy
      ? (await this.list()).map((m) => m.mountPoint).filter((mp) => mp.startsWith(`${path}/`))
      : [];
    const why = [
      ...(holders.length > 0 ? [`held by ${formatHolders(holders)}`] : []),
      ...(below.length > 0 ? [`mounted below it: ${below.join(', ')}`] : []),
    ];
    const reason = failureReason(res, 'umount', this.#timeoutMs);
    throw new MountError({
      operation: 'unmount',
      command: 'umount',
      args,
      output: res.output,
      exitCode: res.exitCode,
      signal: res.signal,
      timedOut: res.timedOut,
      code: busy ? 'EBUSY' : undefined,
      reason: busy
        ? `${reason}: target is busy, ${why.length > 0 ? why.join('; ') : 'no holder found in /proc'}`
        : reason,
      holders,
    });
  }

  /**
   * Looks the target up in mountinfo without touching the target itself: a
   * hung filesystem would block the stat (and a libuv thread) forever, so only
   * the parent directory is resolved.
   */
  async #stillMounted(target: string): Promise<boolean> {
    return isMountPointIn(await this.list(), await this.#mountinfoPath(target));
  }

  /** `target` as mountinfo spells it: the parent resolved, the last component untouched. */
  async #mountinfoPath(target: string): Promise<string> {
    const abs = resolve(target);
    try {
      const parent = await this.#fs.realpath(dirname(abs));
      return parent === '/' ? `/${basename(abs)}` : `${parent}/${basename(abs)}`;
    } catch {
      // Parent missing or broken: mountinfo under the literal path decides.
      return abs;
    }
  }

  async isLikelyNotMountPoint(path: string): Promise<boolean> {
    const st = await this.#fs.lstat(path);
    // mount-utils: a symlink is never reported as a mount point.
    if (st.isSymbolicLink()) return true;
    const parent = await this.#fs.lstat(dirname(resolve(path)));
    return st.dev === parent.dev;
  }

  async isMountPoint(path: string): Promise<boolean> {
    let resolved: string;
    try {
      resolved = await this.#fs.realpath(path);
    } catch (err) {
      // A broken mount cannot be resolved but is still listed under its own path.
      if (!isCorruptedMountError(err)) throw err;
      resolved = resolve(path);
    }
    return isMountPointIn(await this.list(), resolved);
  }

  /** Shared with every other caller until the table changes (mount-table.ts): do not modify it. */
  list(): Promise<readonly MountInfo[]> {
    return this.#mountTable.list();
  }

  async getMountRefs(path: string): Promise<string[]> {
    const state = await pathExists(path, this.#fs);
    if (!state.exists) return [];
    if (state.corrupted) {
      this.#log.warn(
        { path, err: String(state.error) },
        'GetMountRefs found a corrupted mount, treating it as unmounted',
      );
      return [];
    }
    return searchMountRefs(await this.list(), await this.#fs.realpath(path));
  }
}

export function createLinuxMounter(opts: LinuxMounterOptions = {}): LinuxMounter {
  return new LinuxMounter(opts);
}

const isBusy = (res: RunResult) => !succeeded(res) && /target is busy|device is busy/i.test(res.output);

function succeeded(res: RunResult): boolean {
  return res.exitCode === 0 && !res.timedOut;
}

function failureReason(res: RunResult, file: string, timeoutMs: number): string {
  if (res.timedOut) return `timed out after ${timeoutMs} ms`;
  if (res.spawnErrorCode) return `cannot run ${file}: ${res.spawnErrorCode}`;
  if (res.signal) return `killed by ${res.signal}`;
  return `exit status ${res.exitCode}`;
}
