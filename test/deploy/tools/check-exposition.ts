// .ci/checks.sh: curl /metrics | node test/deploy/tools/check-exposition.ts
import { text } from 'node:stream/consumers';
import { loadCatalog } from '../catalog.ts';
import { expositionProblems } from '../exposition.ts';

const problems = expositionProblems(await text(process.stdin), loadCatalog());
for (const p of problems) console.error(p);
if (problems.length > 0) process.exit(1);
console.log('every metric in deploy/prometheus/metrics.json is exposed, and nothing else');
