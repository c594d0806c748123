// pino with redaction: secret and token bytes must never reach a log line,
// even if a whole object slips into one.
import { type Logger, pino } from 'pino';

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

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, base: { name: 'podvol' }, redact: { paths: redactPaths, censor: '[REDACTED]' } },
    destination ?? pino.destination(1),
  );
}
