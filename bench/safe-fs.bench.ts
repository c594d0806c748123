// The safe fs primitive against Node's path-based equivalents, on the same
// trees in the same run: rm -r of a tree (removeAllBeneath vs fs.rm) and
// mkdir -p (mkdirAllBeneath vs fs.mkdir recursive). The price of never
// following a symlink and never crossing a mount (one open + an fdinfo read
// per directory, /proc/self/fd lookups per entry), and opening a deep existing
// directory (openDirBeneath) with openat2 and with the component walk.
// Run: node bench/safe-fs.bench.ts [files] [files-per-directory] [rounds]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeFsOps, O_DIRECTORY, O_RDONLY } from '../src/volumehost/fs.ts';
import { createSafeFs } from '../src/volumehost/safe-fs.ts';
import { median } from './lib.ts';

const FILES = Number(process.argv[2] ?? 20_000);
const PER_DIR = Number(process.argv[3] ?? 100);
const ROUNDS = Number(process.argv[4] ?? 3);

const root = mkdtempSync(join(tmpdir(), 'podvol-safefs-bench-'));
const build = (name: string) => {
  for (let d = 0; d * PER_DIR < FILES; d++) {
    const dir = join(root, name, `d${d}`, 'sub');
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < PER_DIR; f++) writeFileSync(join(dir, `f${f}`), 'x');
  }
};
const ms = async (fn: () => Promise<unknown>) => {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};
// The host's filesystem, as the agent's VolumeHost hands it out.
const host = createSafeFs(nodeFsOps());
try {
  const safe: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    build('a');
    build('b');
    plain.push(await ms(() => rm(join(root, 'a'), { recursive: true })));
    safe.push(await ms(() => host.removeAllBeneath(root, 'b')));
  }
  const deep = Array.from({ length: 32 }, (_, i) => `l${i}`).join('/');
  const mkSafe: number[] = [];
  const mkPlain: number[] = [];
  for (let i = 0; i < 200; i++) {
    mkPlain.push(await ms(() => mkdir(join(root, `p${i}`, deep), { recursive: true })));
    mkSafe.push(await ms(() => host.mkdirAllBeneath(root, `s${i}/${deep}`)));
  }
  // The same open both ways in one run: openat2 (one call) and the walk it replaces (one open and mnt_id read per level).
  const viaOpenat2 = createSafeFs(nodeFsOps({ openat2: true }));
  const viaWalk = createSafeFs(nodeFsOps({ openat2: false }));
  const opPlain: number[] = [];
  const opBeneath: number[] = [];
  const opWalk: number[] = [];
  for (let i = 0; i < 200; i++) {
    opPlain.push(await ms(async () => (await open(join(root, 's0', deep), O_RDONLY | O_DIRECTORY)).close()));
    opBeneath.push(await ms(async () => (await viaOpenat2.openDirBeneath(root, `s0/${deep}`)).close()));
    opWalk.push(await ms(async () => (await viaWalk.openDirBeneath(root, `s0/${deep}`)).close()));
  }
  console.log(`safe-fs bench: ${FILES} files in directories of ${PER_DIR}, median of ${ROUNDS}`);
  console.log(
    `  rm -r     fs.rm ${median(plain).toFixed(0)} ms   removeAllBeneath ${median(safe).toFixed(0)} ms   ratio ${(median(safe) / median(plain)).toFixed(2)}`,
  );
  console.log(
    `  mkdir -p (32 levels)   fs.mkdir ${median(mkPlain).toFixed(2)} ms   mkdirAllBeneath ${median(mkSafe).toFixed(2)} ms   ratio ${(median(mkSafe) / median(mkPlain)).toFixed(2)}`,
  );
  console.log(
    `  open (33 levels)   fs.open ${median(opPlain).toFixed(2)} ms   openDirBeneath with openat2 ${median(opBeneath).toFixed(2)} ms (${(median(opBeneath) / median(opPlain)).toFixed(2)}x)   walking ${median(opWalk).toFixed(2)} ms (${(median(opWalk) / median(opPlain)).toFixed(2)}x)`,
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
