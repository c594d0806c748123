// The lint checks of scripts/ (check-layers, check-module-state,
// check-host-seam) as their tests run them: on this repo's src/, or on a
// small source tree written for the test.
import assert from 'node:assert/strict';
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';

/** Runs scripts/<name> with `args` (a src directory, or none for this repo's). */
export function lintScript(name: string): (...args: string[]) => SpawnSyncReturns<string> {
  const script = fileURLToPath(new URL(`../../scripts/${name}`, import.meta.url));
  return (...args) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });
}

/** A temporary src directory holding `files` (path → text), removed after the test. */
export function sourceTree(t: TestContext, files: Record<string, string>): string {
  const src = mkdtempSync(join(tmpdir(), 'lint-src-'));
  t.after(() => rmSync(src, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(src, path)), { recursive: true });
    writeFileSync(join(src, path), text);
  }
  return src;
}

/** The check passes on this repo's src/ and prints nothing. */
export function assertPassesOnSrc(check: (...args: string[]) => SpawnSyncReturns<string>): void {
  const r = check();
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
}

/** The check fails on `src`, printing exactly `problems` (then its summary line). */
export function assertFailsWith(
  check: (...args: string[]) => SpawnSyncReturns<string>,
  src: string,
  problems: string[],
): void {
  const r = check(src);
  assert.equal(r.status, 1);
  assert.deepEqual(r.stderr.trim().split('\n').slice(0, -1), problems);
}
