// Benchmark of the mountinfo parser: 10,000 realistic lines (kubelet-like pod
// volume paths, optional fields, octal escapes, a few "(deleted)" entries),
// parsed many times. Prints ms per parse next to a naive split-only baseline
// measured in the same run. Run: node bench/mountinfo.bench.ts [entries] [rounds]
import { parseMountInfo } from '../src/mount/mountinfo.ts';
import { median } from './lib.ts';

const ENTRIES = Number(process.argv[2] ?? 10_000);
const ROUNDS = Number(process.argv[3] ?? 200);
const BUDGET_MS = 10; // issue 14, P6

function line(i: number): string {
  const uid = `${(i * 2654435761) % 0xffffffff}`.padStart(10, '0');
  const id = 100 + i;
  const parent = i === 0 ? 1 : 100 + Math.floor(i / 2);
  switch (i % 5) {
    case 0:
      return `${id} ${parent} 0:${50 + (i % 900)} / /var/lib/kubelet/pods/${uid}-4b2c-11ee-be56-0242ac120002/volumes/kubernetes.io~empty-dir/cache rw,nosuid,nodev,relatime shared:${i} - tmpfs tmpfs rw,size=65536k,mode=755,inode64,noswap`;
    case 1:
      return `${id} ${parent} 259:1 /var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~configmap/cfg /var/lib/kubelet/pods/${uid}/volume-subpaths/cfg/app/0 ro,nosuid,nodev,noexec,relatime master:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro`;
    case 2:
      return `${id} ${parent} 0:${60 + (i % 50)} / /mnt/with\\040space/and\\011tab/and\\012newline/back\\134slash/${i} rw,relatime shared:2 master:3 - tmpfs my\\040source rw,size=1024k`;
    case 3:
      return `${id} ${parent} 0:45 /exports/data/${i} /var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~nfs/pv-${i} rw,relatime - nfs4 10.0.0.${i % 250}:/exports/data rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.1,local_lock=none,addr=10.0.0.2`;
    default:
      return `${id} ${parent} 259:1 /etc/resolv.conf//deleted /run/containers/${uid}/resolv.conf\\040(deleted) rw,relatime - ext4 /dev/nvme0n1p1 rw`;
  }
}

function naive(text: string): number {
  return text.split('\n').map((l) => l.split(' ')).length;
}

interface Timing {
  median: number;
  mean: number;
}

/**
 * Times `fns` in alternation, one call of each per round, so that a shared
 * machine's load changes hit the baseline and the parser alike.
 */
function measure(fns: (() => unknown)[]): Timing[] {
  for (let i = 0; i < 20; i++) for (const fn of fns) fn(); // warm up the JIT
  const times = fns.map((): number[] => []);
  for (let i = 0; i < ROUNDS; i++) {
    for (const [k, fn] of fns.entries()) {
      const t0 = process.hrtime.bigint();
      fn();
      times[k]?.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  return times.map((t) => ({
    median: median(t),
    mean: t.reduce((a, b) => a + b, 0) / t.length,
  }));
}

const text = Array.from({ length: ENTRIES }, (_, i) => line(i)).join('\n') + '\n';
const parsed = parseMountInfo(text);
if (parsed.length !== ENTRIES) throw new Error(`parsed ${parsed.length} entries, expected ${ENTRIES}`);
if (parsed[2]?.mountPoint !== '/mnt/with space/and\ttab/and\nnewline/back\\slash/2') {
  throw new Error(`escapes decoded wrongly: ${JSON.stringify(parsed[2]?.mountPoint)}`);
}

const [base, ours] = measure([() => naive(text), () => parseMountInfo(text)]);
if (!base || !ours) throw new Error('measure returned fewer timings than functions');
const fmt = (n: number) => n.toFixed(3).padStart(8);
console.log(
  `mountinfo: ${ENTRIES} entries, ${(text.length / 1024).toFixed(0)} KiB, ${ROUNDS} rounds, node ${process.version}`,
);
console.log(`  naive split baseline  median ${fmt(base.median)} ms  mean ${fmt(base.mean)} ms`);
console.log(`  parseMountInfo        median ${fmt(ours.median)} ms  mean ${fmt(ours.mean)} ms`);
console.log(`  ratio parse/baseline  ${(ours.median / base.median).toFixed(2)}x`);
console.log(
  `  budget ${BUDGET_MS} ms per parse: ${ours.median < BUDGET_MS ? 'OK' : 'OVER'} (median is ${((ours.median / BUDGET_MS) * 100).toFixed(0)}% of it)`,
);
