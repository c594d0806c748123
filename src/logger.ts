// The one logging type every layer takes. A pino Logger satisfies it; tests
// pass a recording object. Log objects never carry secret bytes or sensitive
// mount options (the agent's pino instance also redacts them).

export type LogFn = (obj: Record<string, unknown>, msg?: string) => void;

export interface Logger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  /** A logger whose lines carry `bindings` as well (pino's child). */
  child(bindings: Record<string, unknown>): Logger;
}

/** A logger that drops everything: the default where a caller passes none. */
export function silentLogger(): Logger {
  const noop: LogFn = () => {};
  const logger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => logger };
  return logger;
}
