// VolumeHost.getExec(): argv only, never a shell, always a timeout.
import { execa } from 'execa';
import type { Exec } from './types.ts';

export function createExec(defaultTimeoutMs = 30_000): Exec {
  return {
    async run(file, args, timeoutMs = defaultTimeoutMs) {
      const r = await execa(file, args, { all: true, reject: false, timeout: timeoutMs, stdin: 'ignore' });
      return { exitCode: r.exitCode ?? -1, output: r.all ?? '' };
    },
  };
}
