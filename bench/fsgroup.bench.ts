// Benchmark of applying a pod's fsGroup to a volume of 100,000 files (kubelet's
// SetVolumeOwnership): the recursive walk every plugin does by default, against
// fsGroupChangePolicy OnRootMismatch on a volume whose root is already right,
// both measured in the same run on the same tree.
// Run: node bench/fsgroup.bench.ts [files] [files-per-directory] [rounds]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setVolumeOwnership } from '../src/plugins/volume-ownership.ts';
import { nodeFsOps } from '../src/volumehost/fs.ts';
import { SafeDir } from '../src/volumehost/safe-fs.ts';
import { median } from './lib.ts';

const FILES = Number(process.argv[2] ?? 100_000);
const PER_DIR = Number(process.argv[3] ?? 1000);
const ROUNDS = Number(process.argv[4] ?? 3);
// As root, a group nobody has, so the first walk really changes every entry; otherwise our own group.
const GID = process.getuid?.() === 0 ? 4321 : (process.getgid?.() ?? 0);

const root = mkdtempSync(join(tmpdir(), 'podvol-fsgroup-bench-'));
try {
  for (let d = 0; d * PER_DIR < FILES; d++) {
    const dir = join(root, `d${d}`);
    mkdirSync(dir);
    for (let f = 0; f < PER_DIR && d * PER_DIR + f < FILES; f++)
      writeFileSync(join(dir, `f${f}`), '', { mode: 0o644 });
  }

  const time = async (policy: string | undefined) => {
    const t0 = process.hrtime.bigint();
    const dir = await SafeDir.openRoot(root, root, nodeFsOps());
    const r = await setVolumeOwnership(dir, GID, { readOnly: false, fsGroupChangePolicy: policy }).finally(
      () => dir.close(),
    );
    return { ms: Number(process.hrtime.bigint() - t0) / 1e6, ...r };
  };

  const first = await time(undefined); // changes every entry
  const walks: number[] = [];
  const skips: number[] = [];
  let entries = first.files;
  for (let i = 0; i < ROUNDS; i++) {
    const w = await time('Always');
    walks.push(w.ms);
    entries = w.files;
    const s = await time('OnRootMismatch');
    if (!s.skipped) throw new Error('OnRootMismatch walked a volume whose root is already right');
    skips.push(s.ms);
  }
  const walk = median(walks);
  const skip = median(skips);
  const fmt = (n: number) => n.toFixed(2).padStart(10);
  console.log(
    `fsGroup ${GID} on ${FILES} files (${entries} entries, ${PER_DIR} per directory), ${ROUNDS} rounds, node ${process.version}`,
  );
  console.log(
    `first walk, every entry changed   ${fmt(first.ms)} ms  (${Math.round(first.files / (first.ms / 1000))} entries/s)`,
  );
  console.log(
    `recursive walk (Always, baseline) ${fmt(walk)} ms  (${Math.round(entries / (walk / 1000))} entries/s)`,
  );
  console.log(`OnRootMismatch, root already right ${fmt(skip)} ms`);
  console.log(`ratio recursive / OnRootMismatch  ${(walk / skip).toFixed(0).padStart(10)}x`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
