// kubelet's csiDrivers store (csi_drivers_store.go): the CSI drivers that
// registered through the plugin watcher, by name. The CSI plugin finds the
// socket of a volume's driver here; a driver not (yet) registered makes every
// operation fail transiently, as in kubelet.

export interface RegisteredDriver {
  name: string;
  /** The driver's CSI socket (unix path). */
  endpoint: string;
  /** The highest 1.x version it advertised, e.g. "1.0.0". */
  version: string;
  /** The registration socket it came from, so only that socket's removal deregisters it. */
  registrationSocket: string;
  nodeID?: string;
  vendorVersion?: string;
}

export class DriversStore {
  readonly #drivers = new Map<string, RegisteredDriver>();
  readonly #listeners = new Set<(name: string) => void>();

  get(name: string): RegisteredDriver | undefined {
    return this.#drivers.get(name);
  }

  list(): RegisteredDriver[] {
    return [...this.#drivers.values()];
  }

  set(d: RegisteredDriver): void {
    this.#drivers.set(d.name, d);
    this.#emit(d.name);
  }

  delete(name: string): void {
    if (this.#drivers.delete(name)) this.#emit(name);
  }

  /** Called with a driver's name whenever it registers or deregisters. */
  onChange(listener: (name: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(name: string): void {
    for (const l of [...this.#listeners]) l(name);
  }
}

export type Version = readonly [major: number, minor: number, patch: number];

/** A generic version "1.2.3" (or "v1.2", "1") as numbers; undefined when unparseable. */
export function parseVersion(v: string): Version | undefined {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(v.trim());
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

export function compareVersions(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/**
 * kubelet's highestSupportedVersion: the highest version of the list with
 * major 1 (2.x and later are ignored; 0.x is no longer supported).
 */
export function highestSupportedVersion(versions: string[]): string {
  if (versions.length === 0) throw new Error('CSI driver reporting empty array for supported versions');
  let best: Version | undefined;
  let bestRaw = '';
  let parseErr = '';
  for (const raw of versions) {
    const v = parseVersion(raw);
    if (!v) {
      parseErr = `could not parse "${raw}" as a version`;
      continue;
    }
    if (v[0] > 1) continue;
    if (!best || compareVersions(best, v) < 0) {
      best = v;
      bestRaw = raw;
    }
  }
  if (!best) {
    throw new Error(
      `could not find a highest supported version from versions (${JSON.stringify(versions)}) reported by this driver${parseErr ? `: ${parseErr}` : ''}`,
    );
  }
  if (best[0] !== 1)
    throw new Error(`highest supported version reported by driver is ${bestRaw}, must be v1.x`);
  return best.join('.');
}
