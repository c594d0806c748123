// systemd-run --scope wrapping, as mount-utils does: a FUSE daemon started by
// mount then lives in its own transient scope and survives a restart of the
// agent's service. Only used when systemd really runs the host.
import { access } from 'node:fs/promises';
import type { Logger } from '../logger.ts';
import type { CommandRunner } from './exec.ts';

/** Present only when systemd is PID 1 (sd_booted()). */
export const SYSTEMD_RUNTIME_DIR = '/run/systemd/system';

export interface SystemdProbeOptions {
  runner: CommandRunner;
  timeoutMs: number;
  logger: Logger;
  runtimeDir?: string;
}

/**
 * True when `systemd-run --scope` works here. Without /run/systemd/system no
 * process is started at all; otherwise the probe mount-utils uses is run.
 */
export async function detectSystemd(opts: SystemdProbeOptions): Promise<boolean> {
  try {
    await access(opts.runtimeDir ?? SYSTEMD_RUNTIME_DIR);
  } catch {
    opts.logger.debug({}, 'systemd is not PID 1, mounts are not wrapped in systemd-run');
    return false;
  }
  const args = ['--description=Kubernetes systemd probe', '--scope', 'true'];
  const res = await opts.runner({ file: 'systemd-run', args, timeoutMs: opts.timeoutMs });
  const ok = res.exitCode === 0;
  if (ok) opts.logger.info({}, 'systemd detected, mounts will run in transient scopes');
  else
    opts.logger.info(
      { output: res.output, exitCode: res.exitCode },
      'systemd-run probe failed, not using it',
    );
  return ok;
}

/** The argv that runs `command args...` inside a transient scope. */
export function wrapInScope(
  target: string,
  command: string,
  args: readonly string[],
): { file: string; args: string[] } {
  return {
    file: 'systemd-run',
    args: [`--description=Kubernetes transient mount for ${target}`, '--scope', '--', command, ...args],
  };
}
