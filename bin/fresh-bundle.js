// Which code bin/podvol.js runs: the bundle (dist/bundle, scripts/build-bundle.mjs)
// or the TypeScript sources. Plain JavaScript, as bin/podvol.js, for any Node.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The bundle runs only if it was built after every source file and the lock
 * file last changed (scripts/build-bundle.mjs stamps the time its build
 * started): an edit, a checkout or a rebase since means the sources run.
 * About 200 stat calls, a few milliseconds; the bundle saves far more.
 */
export function freshBundle() {
  let startedAt;
  try {
    startedAt = JSON.parse(
      readFileSync(new URL('../dist/bundle/stamp.json', import.meta.url), 'utf8'),
    ).startedAt;
  } catch {
    return false;
  }
  const newer = (path) => statSync(path).mtimeMs >= startedAt;
  // Files only: a directory's time changes with a copy (an image layer) that changes no file.
  const changedUnder = (dir) =>
    readdirSync(dir, { withFileTypes: true }).some((e) =>
      e.isDirectory() ? changedUnder(`${dir}/${e.name}`) : newer(`${dir}/${e.name}`),
    );
  try {
    return (
      !newer(fileURLToPath(new URL('../package-lock.json', import.meta.url))) &&
      !changedUnder(fileURLToPath(new URL('../src', import.meta.url)))
    );
  } catch {
    return false;
  }
}
