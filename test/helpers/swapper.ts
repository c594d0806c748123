// A hostile "container" for race tests: a separate process that keeps swapping
// directories for symlinks to somewhere outside and back.
import { type ChildProcess, spawn } from 'node:child_process';
import type { TestContext } from 'node:test';

/**
 * A separate process that, as fast as it can, swaps the directories below
 * `tree` for symlinks to `outside` and back (and files for symlinks to files
 * outside): what a container still writing to its emptyDir can do during
 * teardown.
 */
export function startSwapper(t: TestContext, tree: string, outside: string): ChildProcess {
  const code = `
    const fs = require('node:fs');
    const [tree, outside] = process.argv.slice(1);
    let i = 0;
    for (;;) {
      const k = i++ % 4;
      const d = tree + '/sub' + k;
      try { fs.renameSync(d, d + '.away'); } catch {}
      try { fs.symlinkSync(outside, d); } catch {}
      try { fs.symlinkSync(outside + '/f' + k, d + '.away/f0'); } catch {}
      try { fs.unlinkSync(d); } catch {}
      try { fs.renameSync(d + '.away', d); } catch {}
      // Never mkdir -p: a process in a container cannot bring back the host's pod directory
      // once podvol has removed it, and a recreated one would be a directory podvol never made.
      try { try { fs.mkdirSync(d); } catch (e) { if (e.code !== 'EEXIST') throw e; } fs.writeFileSync(d + '/new' + (i % 7), 'x'); } catch {}
      if (i % 50 === 0) { try { fs.symlinkSync(outside, tree + '/top' + (i % 3)); } catch {} }
    }`;
  const child = spawn(process.execPath, ['-e', code, tree, outside], { stdio: 'ignore' });
  t.after(() => {
    child.kill('SIGKILL');
  });
  return child;
}

/**
 * Fills `dir` with `n` files and `n` more in `dir/nested`; the result tells
 * whether every one of them is still there with its content. (Files added
 * through a symlink by the "container" do not count: it could add them anyway.)
 */
export async function precious(dir: string, n = 50): Promise<() => boolean> {
  const { mkdir, writeFile } = await import('node:fs/promises');
  const { readFileSync } = await import('node:fs');
  await mkdir(`${dir}/nested`, { recursive: true });
  const files = [...Array(n).keys()].flatMap((i) => [`${dir}/f${i}`, `${dir}/nested/f${i}`]);
  for (const f of files) await writeFile(f, `precious ${f}`);
  return () =>
    files.every((f) => {
      try {
        return readFileSync(f, 'utf8') === `precious ${f}`;
      } catch {
        return false;
      }
    });
}
