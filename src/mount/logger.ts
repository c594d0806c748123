// The logging surface the mount layer needs; a pino logger satisfies it.
// Log objects never hold sensitive mount options, only their masked form.

export type MountLogFn = (obj: Record<string, unknown>, msg?: string) => void;

export interface MountLogger {
  debug: MountLogFn;
  info: MountLogFn;
  warn: MountLogFn;
  error: MountLogFn;
}

const noop: MountLogFn = () => {};

export function silentLogger(): MountLogger {
  return { debug: noop, info: noop, warn: noop, error: noop };
}
