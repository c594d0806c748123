// node bench/cpuprofile.ts <file.cpuprofile>...: where a thread of podvol spent
// its time, from the profiles BENCH_PODVOL_NODE_ARGS="--cpu-prof
// --cpu-prof-dir=<dir>" leaves (one file per thread: the main thread, and the
// spawning worker where the fallback runner runs). Prints the span, busy and idle time, self time by file and by
// function, and inclusive time by function (a function counted once per stack
// however often it recurses), so a change's effect on the CPU per volume can be
// read before and after.
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const fileOf = (f: CallFrame) => f.url.replace(/.*\//, '');
const nameOf = (f: CallFrame) => f.functionName || '(anonymous)';
const add = <K>(m: Map<K, number>, k: K, v: number) => m.set(k, (m.get(k) ?? 0) + v);
const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `  ${v.toFixed(0).padStart(7)} ms  ${k}`)
    .join('\n');

function report(path: string): string {
  const p = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfMs = new Map<number, number>();
  p.samples.forEach((id, i) => {
    add(selfMs, id, (p.timeDeltas[i] ?? 0) / 1000);
  });
  let idle = 0;
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const n of p.nodes) {
    const ms = selfMs.get(n.id) ?? 0;
    if (ms === 0) continue;
    if (n.callFrame.functionName === '(idle)') {
      idle += ms;
      continue;
    }
    add(byFile, fileOf(n.callFrame) || '(native)', ms);
    add(byFunction, `${nameOf(n.callFrame)} ${fileOf(n.callFrame)}:${n.callFrame.lineNumber + 1}`, ms);
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const f = (byId.get(id) as ProfileNode).callFrame;
      const k = `${nameOf(f)} ${fileOf(f)}`;
      if (seen.has(k) || f.functionName === '(root)') continue;
      seen.add(k);
      add(inclusive, k, ms);
    }
  }
  const span = (p.endTime - p.startTime) / 1000;
  return [
    `${path}: span ${span.toFixed(0)} ms, busy ${(span - idle).toFixed(0)} ms, idle ${idle.toFixed(0)} ms`,
    `self by file:\n${top(byFile, 12)}`,
    `self by function:\n${top(byFunction, 25)}`,
    `inclusive by function:\n${top(inclusive, 40)}`,
  ].join('\n');
}

for (const path of process.argv.slice(2)) console.log(report(path));
