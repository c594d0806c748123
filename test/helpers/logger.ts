// A Logger that hands every line to the test; child loggers write to the same sink.
import type { Logger } from '../../src/logger.ts';

export type LogSink = (level: string, obj: Record<string, unknown>, msg: string | undefined) => void;

export function recordingLogger(sink: LogSink, bindings: Record<string, unknown> = {}): Logger {
  const at = (level: string) => (obj: Record<string, unknown>, msg?: string) =>
    sink(level, { ...bindings, ...obj }, msg);
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => recordingLogger(sink, { ...bindings, ...more }),
  };
}
