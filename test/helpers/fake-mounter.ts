// An in-memory Mounter for unit tests of the layers above (a test double: the
// daemon never runs it, `podvol plan` has its own recording mounter). It keeps
// a mount table (src/mount/memory-table.ts), records every call, validates options like the real one, and can be
// told to fail for a given target. By default it also touches the real file
// system the way the real mounter does (existence checks, removing the
// directory in cleanupMountPoint), so plugin tests can use temp directories.
import { lstat, realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import { isCorruptedMountError, isNotExistError, mountPointMissing } from '../../src/mount/errors.ts';
import { MemoryMountTable } from '../../src/mount/memory-table.ts';
import { validateMountRequest } from '../../src/mount/options.ts';
import { UnsafeTargetError } from '../../src/mount/target.ts';
import type { Interface, MountCallOptions, MountInfo, UnmountOutcome } from '../../src/mount/types.ts';

export type FakeMethod = keyof Interface;

export type FakeCall =
  | {
      method: 'mount';
      source: string;
      target: string;
      fstype: string;
      options: string[];
      /** Recorded as given, so tests can assert what would have been passed; the fake logs nothing. */
      sensitiveOptions: string[];
      call: MountCallOptions;
    }
  | { method: 'unmount'; target: string }
  | { method: 'unmountWithForce'; target: string; timeoutMs: number }
  | { method: 'isLikelyNotMountPoint' | 'isMountPoint' | 'getMountRefs'; path: string }
  | { method: 'list' };

export interface FakeMounterOptions {
  /** Initial table; ids and missing fields are filled in. */
  mounts?: Array<Partial<MountInfo> & { mountPoint: string }>;
  /** Check and remove real paths like the Linux mounter. Default true. */
  useFileSystem?: boolean;
  /** Run the same option hygiene as the Linux mounter. Default true. */
  validateOptions?: boolean;
}

interface InjectedError {
  error: Error;
  methods: ReadonlySet<FakeMethod> | undefined;
}

export class FakeMounter implements Interface {
  /** Every call, in order. */
  readonly calls: FakeCall[] = [];
  readonly #table: MemoryMountTable;
  readonly #useFs: boolean;
  readonly #validate: boolean;
  readonly #errors = new Map<string, InjectedError>();
  readonly #outcomes = new Map<string, UnmountOutcome>();

  constructor(opts: FakeMounterOptions = {}) {
    this.#useFs = opts.useFileSystem ?? true;
    this.#validate = opts.validateOptions ?? true;
    this.#table = new MemoryMountTable(opts.mounts);
  }

  /** The table as it is now (not a copy: read it, do not change it). */
  table(): readonly MountInfo[] {
    return this.#table.entries();
  }

  /** Adds an entry to the table as if something else had mounted it. */
  addMount(m: Partial<MountInfo> & { mountPoint: string }): MountInfo {
    return this.#table.add(m);
  }

  /** Makes calls on `target` throw `error`: for the listed methods, or all of them. Persists until cleared. */
  injectError(target: string, error: Error, methods?: readonly FakeMethod[]): void {
    this.#errors.set(resolve(target), { error, methods: methods ? new Set(methods) : undefined });
  }

  clearError(target: string): void {
    this.#errors.delete(resolve(target));
  }

  /** Makes unmountWithForce on `target` report this outcome (e.g. 'forced', 'lazy') when it unmounts. */
  setUnmountOutcome(target: string, outcome: UnmountOutcome): void {
    this.#outcomes.set(resolve(target), outcome);
  }

  /** Is anything mounted exactly at `path` in the fake table? */
  isMounted(path: string): boolean {
    return this.#table.isMountPoint(path);
  }

  /** Calls of one method, typed. */
  callsOf<M extends FakeCall['method']>(method: M): Extract<FakeCall, { method: M }>[] {
    return this.calls.filter((c): c is Extract<FakeCall, { method: M }> => c.method === method);
  }

  #injected(path: string, method: FakeMethod): Error | undefined {
    const e = this.#errors.get(resolve(path));
    if (!e) return undefined;
    return !e.methods || e.methods.has(method) ? e.error : undefined;
  }

  #throwInjected(path: string, method: FakeMethod): void {
    const err = this.#injected(path, method);
    if (err) throw err;
  }

  async mount(
    source: string,
    target: string,
    fstype: string,
    options: string[],
    call?: MountCallOptions,
  ): Promise<void> {
    // Recorded as given, then checked exactly as LinuxMounter checks it.
    this.calls.push({
      method: 'mount',
      source,
      target,
      fstype,
      options: [...options],
      sensitiveOptions: [...(call?.sensitiveOptions ?? [])],
      call: { ...call },
    });
    if (this.#validate) validateMountRequest(source, target, fstype, options, call ?? {});
    this.#throwInjected(target, 'mount');
    const mountPoint = resolve(target);
    if (this.#useFs) {
      try {
        // As the Linux mounter (target.ts): no symlink at or on the way to the target.
        if ((await lstat(mountPoint)).isSymbolicLink())
          throw new UnsafeTargetError(mountPoint, 'the target is a symlink');
        const real = await realpath(mountPoint);
        if (real !== mountPoint)
          throw new UnsafeTargetError(mountPoint, `the target resolves to ${real} (a symlink on the way)`);
      } catch (err) {
        if (!isNotExistError(err)) throw err;
        throw mountPointMissing(target);
      }
    }
    this.#table.mount(source, mountPoint, fstype, options);
  }

  async unmount(target: string): Promise<UnmountOutcome> {
    this.calls.push({ method: 'unmount', target });
    this.#throwInjected(target, 'unmount');
    return this.#table.unmount(target) ? 'unmounted' : 'not-mounted';
  }

  async unmountWithForce(target: string, timeoutMs: number): Promise<UnmountOutcome> {
    this.calls.push({ method: 'unmountWithForce', target, timeoutMs });
    this.#throwInjected(target, 'unmountWithForce');
    if (!this.#table.unmount(target)) return 'not-mounted';
    return this.#outcomes.get(resolve(target)) ?? 'unmounted';
  }

  async isLikelyNotMountPoint(path: string): Promise<boolean> {
    this.calls.push({ method: 'isLikelyNotMountPoint', path });
    this.#throwInjected(path, 'isLikelyNotMountPoint');
    if (this.#useFs && (await lstat(path)).isSymbolicLink()) return true;
    return !this.#table.isMountPoint(path);
  }

  async isMountPoint(path: string): Promise<boolean> {
    this.calls.push({ method: 'isMountPoint', path });
    this.#throwInjected(path, 'isMountPoint');
    const p = this.#useFs ? await realpath(path) : resolve(path);
    return this.#table.isMountPoint(p);
  }

  async list(): Promise<MountInfo[]> {
    this.calls.push({ method: 'list' });
    return this.#table.list();
  }

  async getMountRefs(path: string): Promise<string[]> {
    this.calls.push({ method: 'getMountRefs', path });
    const injected = this.#injected(path, 'getMountRefs');
    if (injected) {
      if (isCorruptedMountError(injected)) return [];
      throw injected;
    }
    let p = resolve(path);
    if (this.#useFs) {
      try {
        p = await realpath(path);
      } catch (err) {
        if (isNotExistError(err)) return [];
        throw err;
      }
    }
    return this.#table.mountRefs(p);
  }
}
