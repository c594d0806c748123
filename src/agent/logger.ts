// pino with redaction: secret and token bytes must never reach a log line,
// even if a whole object slips into one. JSON for machines; pino-pretty's
// one-line text for a person at a terminal (redaction happens before either).
import { type Logger, pino } from 'pino';
import { PinoPretty } from 'pino-pretty';

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const redactPaths = [
  'token',
  '*.token',
  'data',
  '*.data',
  'binaryData',
  '*.binaryData',
  'stringData',
  '*.stringData',
  '*.status.token',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  '*.headers.authorization',
];

export const logFormats = ['json', 'text'] as const;
export type LogFormat = (typeof logFormats)[number];

/** text when stdout is a terminal (an interactive `npm start`), JSON for journald, kubectl logs and pipes. */
export const defaultLogFormat = (): LogFormat => (process.stdout.isTTY ? 'text' : 'json');

export function createLogger(
  level: string,
  opts: { format?: LogFormat; destination?: NodeJS.WritableStream; fd?: 1 | 2 } = {},
): Logger {
  const fd = opts.fd ?? 1;
  const options = { level, base: { name: 'podvol' }, redact: { paths: redactPaths, censor: '[REDACTED]' } };
  if ((opts.format ?? 'json') === 'text') {
    // In-process and synchronous (no transport worker), so the single executable needs no extra file
    // and nothing logged just before exit is lost.
    const pretty = PinoPretty({
      destination: opts.destination ?? fd,
      sync: true,
      colorize: opts.destination === undefined && Boolean((fd === 1 ? process.stdout : process.stderr).isTTY),
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,name',
      singleLine: true,
    });
    return pino(options, pretty);
  }
  return pino(options, opts.destination ?? pino.destination(fd));
}
