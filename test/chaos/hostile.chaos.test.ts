// Chaos: a corpus of hostile manifests (traversal, planted symlinks, option
// injection, control characters, huge and deeply nested documents, alias
// bombs, too many volumes). Each one must be refused or fail with a reason;
// a well-formed pod among them is set up; nothing outside the pod
// directories changes; podvol does not crash; its peak memory is printed.
import assert from 'node:assert/strict';
import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { waitFor } from '../helpers/daemon.ts';
import { mountTest } from '../helpers/mountns.ts';
import { chaosSetup, figure, peakRssMiB } from './lib.ts';

type Vol = Record<string, unknown> & { name: string };

const pod = (name: string, volumes: Vol[], extra: { uid?: string; mountPaths?: string[] } = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, ...(extra.uid ? { uid: extra.uid } : {}) },
  spec: {
    containers: [
      {
        name: 'c',
        image: 'i',
        volumeMounts: volumes.map((v, i) => ({
          name: v.name,
          mountPath: extra.mountPaths?.[i] ?? `/m/${v.name}`,
        })),
      },
    ],
    volumes,
  },
});

mountTest('chaos: hostile manifests are refused with reasons and touch nothing outside', async (t) => {
  const { base, root, manifests, guard, start, state } = await chaosSetup(t);
  const out = guard.path;
  const dapi = (path: string): Vol => ({
    name: 'd',
    downwardAPI: { items: [{ path, fieldRef: { fieldPath: 'metadata.name' } }] },
  });
  const corpus: Record<string, string> = {
    'hostpath-dotdot.json': JSON.stringify(
      pod('hp', [{ name: 'h', hostPath: { path: `${root}/../canary` } }]),
    ),
    'dapi-traversal.json': JSON.stringify(pod('dt', [dapi('../../../../canary/a')])),
    'dapi-absolute.json': JSON.stringify(pod('da', [dapi(`${out}/a`)])),
    'mountpath-dotdot.json': JSON.stringify(
      pod('mp', [{ name: 'e', emptyDir: {} }, dapi('x')], {
        mountPaths: ['/data', '/data/../../../../../..'],
      }),
    ),
    'mountpath-bare-dotdot.json': JSON.stringify(
      pod('mb', [{ name: 'e', emptyDir: {} }, dapi('x')], { mountPaths: ['/data', '..'] }),
    ),
    'planted-symlink.json': JSON.stringify(
      pod('sl', [{ name: 'e', emptyDir: {} }], { uid: 'chaos-planted' }),
    ),
    'option-injection-size.json': JSON.stringify(
      pod('oi', [{ name: 'e', emptyDir: { medium: 'Memory', sizeLimit: '1Mi,exec,suid' } }]),
    ),
    'option-injection-medium.json': JSON.stringify(
      pod('om', [{ name: 'e', emptyDir: { medium: 'Memory,exec' } }]),
    ),
    'nul-byte.json': JSON.stringify(
      pod('nb', [{ name: 'h', hostPath: { path: `${out}/a\u0000b`, type: 'File' } }]),
    ),
    'bad-uid.json': JSON.stringify(pod('bu', [{ name: 'e', emptyDir: {} }], { uid: '../../canary' })),
    'control-chars.json': JSON.stringify(
      pod('cc', [
        { name: 'h', hostPath: { path: `${out}/\u001b[2J\u001b]0;owned\u0007`, type: 'Directory' } },
      ]),
    ),
    'too-many-volumes.json': JSON.stringify(
      pod(
        'tm',
        Array.from({ length: 2000 }, (_, i) => ({ name: `v${i}`, emptyDir: {} })),
      ),
    ),
    'huge.yaml': `${'# padding\n'.repeat(10)}apiVersion: v1\nkind: Pod\nmetadata:\n  name: huge\n  annotations:\n    a: "${'x'.repeat(2 * 1024 * 1024)}"\nspec:\n  containers: [{name: c, image: i}]\n`,
    'deep.yaml': `x: ${'['.repeat(200_000)}${']'.repeat(200_000)}\n`,
    'deep-block.yaml': `${'- '.repeat(100_000)}x\n`,
    'alias-bomb.yaml': `a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n`,
    'not-yaml.yaml': ': : [\n',
    // Document bombs (issue 21 finding 6): far under the size limit, each one error.
    'document-bomb.yaml': '---\n{}\n'.repeat(150_000),
    'empty-documents.yaml': '---\n'.repeat(2_600_000),
    'broken-documents.yaml': 'x: [\n---\n'.repeat(100_000),
    'empty.yaml': '',
  };
  const good = 'good.json';
  for (const [file, text] of Object.entries(corpus)) await writeFile(join(manifests, file), text);
  await writeFile(join(manifests, 'file-too-large.yaml'), Buffer.alloc(11 * 1024 * 1024, 'a'));
  corpus['file-too-large.yaml'] = '';
  await writeFile(
    join(manifests, good),
    JSON.stringify(pod('good', [{ name: 'e', emptyDir: {} }, dapi('name')])),
  );
  // A symlink planted where the emptyDir plugin directory goes, before podvol ever ran.
  const planted = join(root, 'pods', 'chaos-planted', 'volumes');
  await mkdir(planted, { recursive: true });
  await symlink(out, join(planted, 'kubernetes.io~empty-dir'));

  const p = await start(['--adopt-root-dir']);
  const judged = async () => {
    const s = await p.status();
    const reasons = new Map<string, string>();
    for (const e of s.errors) if (e.file) reasons.set(e.file.split('/').pop() ?? '', e.reason);
    for (const x of s.pods) {
      const failed = x.volumes.find((v) => v.state === 'failed');
      if (failed) reasons.set(x.name, failed.reason);
    }
    return { s, reasons };
  };
  const fileOf: Record<string, string> = {
    'planted-symlink.json': 'sl-testnode',
    'option-injection-size.json': 'oi-testnode',
    'option-injection-medium.json': 'om-testnode',
    'nul-byte.json': 'nb-testnode',
    'control-chars.json': 'cc-testnode',
    'mountpath-bare-dotdot.json': 'mb-testnode',
    'mountpath-dotdot.json': 'mp-testnode',
  };
  // A file is judged by an error naming it or a failed volume of its pod.
  const verdict = (r: Map<string, string>, f: string) => r.get(f) ?? r.get(fileOf[f] ?? '');
  // mountPaths are the runtime's business (the API server admits them); podvol must only stay inside.
  const mayMount = new Set(['mountpath-dotdot.json']);
  const { s, reasons } = await waitFor(
    'every hostile manifest judged and the good pod mounted',
    async () => {
      const j = await judged();
      const goodPod = j.s.pods.find((x) => x.name === 'good-testnode');
      const allJudged = Object.keys(corpus).every(
        (f) => verdict(j.reasons, f) !== undefined || mayMount.has(f),
      );
      return allJudged && goodPod?.volumes.every((v) => v.state === 'mounted') ? j : undefined;
    },
    120_000,
  ).catch(async (err) => {
    const j = await judged();
    const missing = Object.keys(corpus).filter(
      (f) => verdict(j.reasons, f) === undefined && !mayMount.has(f),
    );
    throw new Error(
      `${err.message}; not judged: ${missing.join(', ')}; status: ${JSON.stringify(j.s).slice(0, 3000)}`,
    );
  });
  for (const f of Object.keys(corpus)) figure(t, `hostile: ${f}`, verdict(reasons, f) ?? 'set up (allowed)');
  // The bombs stop nothing: a manifest added now is read, /readyz stays ok, /status stays small.
  await writeFile(join(manifests, 'late.json'), JSON.stringify(pod('late', [{ name: 'e', emptyDir: {} }])));
  await waitFor(
    'a manifest added after the bombs',
    async () => (await p.status()).pods.some((x) => x.name === 'late-testnode') || undefined,
  );
  const statusBytes = (await p.get('/status')).body.length;
  figure(t, 'hostile: /status bytes', statusBytes);
  assert.ok(statusBytes < 200_000, `/status is ${statusBytes} bytes`);
  assert.equal((await p.get('/readyz')).status, 200);
  const bombs: [string, string][] = [
    ['document-bomb.yaml', 'TooManyDocuments'],
    ['empty-documents.yaml', 'TooManyDocuments'],
    ['broken-documents.yaml', 'TooManyDocuments'],
    ['empty.yaml', 'EmptyManifest'],
  ];
  for (const [f, reason] of bombs) assert.equal(reasons.get(f), reason, f);
  const refused = Object.keys(corpus).filter((f) => verdict(reasons, f) !== undefined).length;
  figure(
    t,
    'hostile: manifests refused or failed with a reason',
    `${refused} of ${Object.keys(corpus).length}`,
  );
  figure(t, 'hostile: podvol peak RSS', peakRssMiB(p.proc.pid));
  const outside = await guard.changes();
  // Nothing new beside root, manifests and the canary either.
  // (run/ holds the runtime socket startPodvol asks for.)
  const extra = (await readdir(base)).filter((n) => !['root', 'manifests', 'canary', 'run'].includes(n));
  figure(t, 'hostile: writes outside the pod directories', outside.length + extra.length);
  figure(t, 'hostile: crashes', state.crashes);
  assert.deepEqual(outside, []);
  assert.deepEqual(extra, []);
  assert.equal(state.crashes, 0);
  assert.ok(s.pods.length > 0);
  assert.equal((await p.get('/healthz')).status, 200);
});
