// Runs bin/podvol.js as a child process (never spawnSync: tests serve HTTP
// from this same process) and collects what it printed.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

export const repoRoot = join(import.meta.dirname, '..', '..', '..');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: Record<string, string> = {}, stdin = ''): Promise<CliResult> {
  // The commands read these; whatever the test runner's environment holds must not leak in.
  const base = { ...process.env };
  for (const k of ['PODVOL_SERVER', 'PODVOL_ROOT_DIR', 'PODVOL_NODE_NAME']) delete base[k];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repoRoot, 'bin', 'podvol.js'), ...args], {
      cwd: repoRoot,
      env: { ...base, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
      // Generous: starting node and loading the CLI can take tens of seconds on a loaded machine.
      timeout: 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d) => {
      stderr += d;
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}
