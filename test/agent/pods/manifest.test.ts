import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  MAX_DOCUMENT_BYTES,
  MAX_DOCUMENTS,
  MAX_MANIFEST_BYTES,
  MAX_NESTING_DEPTH,
  parseManifestFile,
} from '../../../src/agent/pods/manifest.ts';
import { CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION } from '../../../src/agent/pods/types.ts';
import { MAX_VOLUMES_PER_POD } from '../../../src/plugins/validation.ts';
import { at } from '../../helpers/must.ts';

const pod = (name: string, extra = '') => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
${extra}spec:
  containers:
    - name: app
      image: busybox
`;

describe('parseManifestFile', () => {
  test('reads every Pod document of a multi-document YAML file and ignores empty documents', () => {
    const text = `${pod('one')}---\n---\n# just a comment\n---\n${pod('two')}`;
    const { pods, errors } = parseManifestFile(text, '/m/pods.yaml', 'node-a');
    assert.deepEqual(errors, []);
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ['one-node-a', 'two-node-a'],
    );
  });

  test('reads a JSON manifest', () => {
    const json = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'from-json', namespace: 'tools' },
      spec: { containers: [{ name: 'app', image: 'busybox' }], volumes: [{ name: 'd', emptyDir: {} }] },
    });
    const { pods, errors } = parseManifestFile(json, '/m/pod.json', 'node-a');
    assert.deepEqual(errors, []);
    assert.equal(at(pods, 0).metadata?.name, 'from-json-node-a');
    assert.equal(at(pods, 0).metadata?.namespace, 'tools');
    assert.deepEqual(at(pods, 0).spec?.volumes, [{ name: 'd', emptyDir: {} }]);
  });

  test('a stream of JSON documents reads as the same documents written in YAML', () => {
    const docs = ['a', 'b', 'c'].map((name) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: { app: name } },
      spec: {
        containers: [{ name: 'app', image: 'busybox' }],
        volumes: [{ name: 'd', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } }],
      },
    }));
    const json = parseManifestFile(docs.map((d) => JSON.stringify(d)).join('\n---\n'), '/m/p.yaml', 'n');
    const yaml = parseManifestFile(
      docs.map((d) => JSON.stringify(d, null, 2).replace(/^(\s*)"([^"]+)":/gm, '$1$2:')).join('\n---\n'),
      '/m/p.yaml',
      'n',
    );
    assert.deepEqual(json.errors, []);
    assert.equal(json.pods.length, 3);
    assert.deepEqual(json.pods, yaml.pods);
  });

  test('a JSON stream with a broken document still reads the others and numbers the broken one', () => {
    const good = (name: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      });
    const { pods, errors } = parseManifestFile(
      [good('one'), '{"apiVersion": "v1",', good('three')].join('\n---\n'),
      '/m/p.yaml',
      'n',
    );
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ['one-n', 'three-n'],
    );
    assert.deepEqual(
      errors.map((e) => [e.document, e.reason]),
      [[2, 'ParseError']],
    );
  });

  test('a JSON stream larger than one document may be is read document by document, not refused whole', () => {
    const padding = 'x'.repeat(300 * 1024);
    const doc = (name: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, annotations: { padding } },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      });
    const text = Array.from({ length: 6 }, (_, i) => doc(`p${i}`)).join('\n---\n');
    assert.ok(text.length > MAX_DOCUMENT_BYTES);
    const { pods, errors } = parseManifestFile(text, '/m/p.yaml', 'n');
    assert.deepEqual(errors, []);
    assert.equal(pods.length, 6);
  });

  test('reports invalid JSON without throwing or quoting the document', () => {
    const { pods, errors } = parseManifestFile('{"apiVersion": "v1", "secret": tok3n', '/m/bad.json', 'n');
    assert.deepEqual(pods, []);
    assert.equal(errors.length, 1);
    assert.equal(at(errors, 0).reason, 'ParseError');
    assert.equal(at(errors, 0).file, '/m/bad.json');
    assert.match(at(errors, 0).message, /^invalid JSON/);
    assert.doesNotMatch(at(errors, 0).message, /tok3n/);
  });

  test('a YAML syntax error in one document does not lose the others', () => {
    const text = `${pod('good')}---\nkind: [\n`;
    const { pods, errors } = parseManifestFile(text, '/m/mixed.yaml', 'n');
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ['good-n'],
    );
    assert.equal(errors.length, 1);
    assert.equal(at(errors, 0).reason, 'ParseError');
    assert.equal(at(errors, 0).document, 2);
    assert.match(at(errors, 0).message, /^invalid YAML: .*line \d+/);
  });

  test('documents that are not v1 Pods are reported with a clear reason', () => {
    const text = [
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n',
      'apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n',
      'metadata: {name: nokind}\n',
      'kind: Pod\nmetadata: {name: noversion}\n',
      'apiVersion: v1\nkind: PodList\nitems: []\n',
      '- just\n- a list\n',
      'plain scalar\n',
    ].join('---\n');
    const { pods, errors } = parseManifestFile(text, '/m/kinds.yaml', 'n');
    assert.deepEqual(pods, []);
    assert.deepEqual(
      errors.map((e) => [e.document, e.reason]),
      [
        [1, 'NotAPod'],
        [2, 'NotAPod'],
        [3, 'NotAPod'],
        [4, 'NotAPod'],
        [5, 'NotAPod'],
        [6, 'NotAPod'],
        [7, 'NotAPod'],
      ],
    );
    assert.match(at(errors, 0).message, /kind "Deployment"/);
    assert.match(at(errors, 1).message, /apiVersion "v2"/);
    assert.match(at(errors, 2).message, /kind is missing/);
    assert.match(at(errors, 3).message, /apiVersion is missing/);
    assert.match(at(errors, 4).message, /one Pod per document/);
    assert.match(at(errors, 5).message, /a list/);
  });

  test('a static pod with an invalid volume is refused as a pod, as kubelet validates a manifest whole', () => {
    const text = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: a, image: b, volumeMounts: [{name: made, mountPath: /m}, {name: cfg, mountPath: /c}]}]
  volumes:
    - {name: made, hostPath: {path: /var/lib/made, type: DirectoryOrCreate}}
    - {name: cfg, configMap: {name: c, items: [{key: k, path: ../escape}]}}
---
${pod('other')}`;
    const { pods, errors } = parseManifestFile(text, '/m/p.yaml', 'n');
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ['other-n'],
      'the other document is still its own pod',
    );
    assert.equal(errors.length, 1);
    assert.equal(at(errors, 0).reason, 'InvalidPod');
    assert.equal(at(errors, 0).document, 1);
    assert.equal(
      at(errors, 0).message,
      `invalid pod: spec.volumes[1].configMap.items[0].path: Invalid value: "../escape": must not contain '..'`,
    );
  });

  test('a volume only this node refuses (gitRepo, disabled in kubelet) does not refuse the pod', () => {
    const text = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: a, image: b, volumeMounts: [{name: src, mountPath: /src}]}]
  volumes: [{name: src, gitRepo: {repository: "https://example.invalid/r.git"}}]
`;
    const { pods, errors } = parseManifestFile(text, '/m/p.yaml', 'n');
    assert.deepEqual(errors, []);
    assert.equal(pods.length, 1);
  });

  test('a pod invalid as a whole is reported and skipped, naming every problem', () => {
    const cases: [string, RegExp][] = [
      ['apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n', /metadata: Required value/],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: a, image: b}]}\n',
        /name is needed/,
      ],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: Web_1}\nspec: {containers: [{name: a, image: b}]}\n',
        /RFC 1123 subdomain/,
      ],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n', /spec: Required value/],
      ['apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {}\n', /spec.containers: Required value/],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: a}]}\n',
        /image: Required value/,
      ],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: Bad_NS}\nspec: {containers: [{name: a, image: b}]}\n',
        /metadata.namespace/,
      ],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, uid: ../../etc}\nspec: {containers: [{name: a, image: b}]}\n',
        /metadata.uid/,
      ],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {num: 1}}\nspec: {containers: [{name: a, image: b}]}\n',
        /metadata.labels\["num"\].*must be a string/,
      ],
      [
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: a, image: b}, {name: a, image: c}]}\n',
        /Duplicate value: "a"/,
      ],
    ];
    for (const [text, expected] of cases) {
      const { pods, errors } = parseManifestFile(text, '/m/p.yaml', 'n');
      assert.deepEqual(pods, [], text);
      assert.equal(errors.length, 1, text);
      assert.equal(at(errors, 0).reason, 'InvalidPod', text);
      assert.match(at(errors, 0).message, expected);
    }
  });

  test('the node suffix must still leave a valid pod name', () => {
    const long = 'a'.repeat(250);
    const { pods, errors } = parseManifestFile(pod(long), '/m/p.yaml', 'node-a');
    assert.deepEqual(pods, []);
    assert.equal(at(errors, 0).reason, 'InvalidPod');
    assert.match(at(errors, 0).message, /no more than 253 characters/);
  });

  test('a second document with the same UID or the same namespace/name is an error', () => {
    const text = [
      pod('a', '  uid: 11111111-2222-3333-4444-555555555555\n'),
      pod('b', '  uid: 11111111-2222-3333-4444-555555555555\n'),
      pod('c'),
      pod('c', '  uid: 99999999-2222-3333-4444-555555555555\n'),
      pod('d'),
      pod('d'),
    ].join('---\n');
    const { pods, errors } = parseManifestFile(text, '/m/dups.yaml', 'n');
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ['a-n', 'c-n', 'd-n'],
    );
    assert.deepEqual(
      errors.map((e) => [e.document, e.reason, e.name]),
      [
        [2, 'DuplicateUID', 'b'],
        [4, 'DuplicatePod', 'c'],
        [6, 'DuplicateUID', 'd'],
      ],
    );
  });

  test('applies what kubelet applies to a static pod', () => {
    const { pods } = parseManifestFile(pod('web'), '/m/web.yaml', 'Node-A');
    const p = at(pods, 0);
    assert.equal(p.metadata?.name, 'web-node-a');
    assert.equal(p.metadata?.namespace, 'default');
    assert.match(p.metadata?.uid ?? '', /^[0-9a-f]{32}$/);
    assert.equal(p.metadata?.annotations?.[CONFIG_HASH_ANNOTATION], p.metadata?.uid);
    assert.equal(p.metadata?.annotations?.[CONFIG_SOURCE_ANNOTATION], 'file');
    assert.equal(p.spec?.nodeName, 'Node-A');
    assert.deepEqual(p.spec?.tolerations, [{ operator: 'Exists', effect: 'NoExecute' }]);
    assert.equal(p.status?.phase, 'Pending');
    // API-server defaulting ran too.
    assert.equal(p.spec?.restartPolicy, 'Always');
    assert.equal(p.spec?.containers[0]?.terminationMessagePath, '/dev/termination-log');
  });

  test('metadata.uid from the manifest is kept as the pod UID', () => {
    const uid = '0f0e0d0c-0b0a-4908-8706-050403020100';
    const { pods } = parseManifestFile(pod('web', `  uid: ${uid}\n`), '/m/web.yaml', 'n');
    assert.equal(at(pods, 0).metadata?.uid, uid);
    assert.equal(at(pods, 0).metadata?.annotations?.[CONFIG_HASH_ANNOTATION], uid);
  });

  test('YAML is read as YAML 1.1 like kubectl: 0644 is octal, timestamps stay strings', () => {
    const text = `${pod('web', '  annotations:\n    since: 2024-01-02\n')}  volumes:
    - name: s
      secret:
        secretName: s
        defaultMode: 0640
`;
    const { pods, errors } = parseManifestFile(text, '/m/web.yaml', 'n');
    assert.deepEqual(errors, []);
    assert.equal(at(pods, 0).spec?.volumes?.[0]?.secret?.defaultMode, 0o640);
    assert.equal(at(pods, 0).metadata?.annotations?.since, '2024-01-02');
  });

  test('the manifest size cap is kubelet’s 10 MiB', () => {
    assert.equal(MAX_MANIFEST_BYTES, 10 * 1024 * 1024);
  });
});

// Issue 15, finding 5: a 400 KB document of nested lists cost 470 MB to parse.
describe('manifest limits (refused while parsing, the other documents still count)', () => {
  const reasons = (text: string, file = '/m/a.yaml') => {
    const { pods, errors } = parseManifestFile(text, file, 'n');
    return {
      pods: pods.map((p) => p.metadata?.name),
      errors: errors.map((e) => [e.document, e.reason]),
    };
  };

  test('400 KB of nested flow lists: TooDeeplyNested, documents before and after are read', () => {
    const deep = `x: ${'['.repeat(200_000)}${']'.repeat(200_000)}\n`;
    assert.deepEqual(reasons(`${pod('a')}---\n${deep}---\n${pod('b')}`), {
      pods: ['a-n', 'b-n'],
      errors: [[2, 'TooDeeplyNested']],
    });
  });

  test('nested block lists and indented maps are counted too', () => {
    assert.deepEqual(reasons(`${'- '.repeat(100_000)}x\n---\n${pod('b')}`), {
      pods: ['b-n'],
      errors: [[1, 'TooDeeplyNested']],
    });
    let text = '';
    for (let i = 0; i <= MAX_NESTING_DEPTH; i++) text += `${' '.repeat(i)}k:\n`;
    assert.deepEqual(reasons(`${text}${' '.repeat(MAX_NESTING_DEPTH + 1)}v\n`).errors, [
      [1, 'TooDeeplyNested'],
    ]);
  });

  test('nesting up to the limit is fine', () => {
    const lists = '['.repeat(MAX_NESTING_DEPTH - 1) + ']'.repeat(MAX_NESTING_DEPTH - 1);
    // The pod's own map is the first level.
    assert.deepEqual(reasons(`${pod('a')}x: ${lists}\n`), { pods: ['a-n'], errors: [] });
  });

  test('deep JSON is refused before JSON.parse', () => {
    const json = `{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    assert.deepEqual(reasons(json, '/m/a.json'), { pods: [], errors: [[1, 'TooDeeplyNested']] });
    // Brackets inside strings are not nesting.
    const ok = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'j', annotations: { a: '['.repeat(1000) } },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    });
    assert.deepEqual(reasons(ok, '/m/a.json'), { pods: ['j-n'], errors: [] });
  });

  test('a document over 1.5 MiB: DocumentTooLarge, the next document is read', () => {
    assert.equal(MAX_DOCUMENT_BYTES, 1.5 * 1024 * 1024);
    const big = `${pod('a')}  x: "${'a'.repeat(MAX_DOCUMENT_BYTES)}"\n`;
    assert.deepEqual(reasons(`${big}---\n${pod('b')}`), { pods: ['b-n'], errors: [[1, 'DocumentTooLarge']] });
    const json = JSON.stringify({ kind: 'Pod', x: 'a'.repeat(MAX_DOCUMENT_BYTES) });
    assert.deepEqual(reasons(json, '/m/a.json').errors, [[1, 'DocumentTooLarge']]);
  });

  test(`a pod with more than ${MAX_VOLUMES_PER_POD} volumes: TooManyVolumes, one message`, () => {
    const manifest = (n: number) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'many' },
        spec: {
          containers: [{ name: 'c', image: 'i' }],
          volumes: Array.from({ length: n }, (_, i) => ({ name: `v${i}`, emptyDir: {} })),
        },
      });
    assert.deepEqual(reasons(manifest(MAX_VOLUMES_PER_POD), '/m/a.json'), { pods: ['many-n'], errors: [] });
    const { errors } = parseManifestFile(manifest(MAX_VOLUMES_PER_POD + 1), '/m/a.json', 'n');
    assert.deepEqual(
      errors.map((e) => [e.reason, e.message]),
      [
        [
          'TooManyVolumes',
          `invalid pod: spec.volumes: Too many: ${MAX_VOLUMES_PER_POD + 1}: must have at most ${MAX_VOLUMES_PER_POD} items (podvol's limit per pod)`,
        ],
      ],
    );
  });
});

describe('manifest files as a whole: too many documents, none at all', () => {
  const reasons = (text: string, file = '/m/pods.yaml') =>
    parseManifestFile(text, file, 'node-a').errors.map((e) => [e.reason, e.document]);

  test(`a file of more than ${MAX_DOCUMENTS} documents is one TooManyDocuments error, and none of it is read`, () => {
    // The bomb: 150,000 documents in 900 KB, far under the size limit.
    const { pods, errors } = parseManifestFile(
      `${pod('first')}${'---\n{}\n'.repeat(150_000)}`,
      '/m/bomb.yaml',
      'n',
    );
    assert.deepEqual(pods, [], 'not even the first document is read');
    assert.equal(errors.length, 1);
    assert.equal(at(errors, 0).reason, 'TooManyDocuments');
    assert.equal(at(errors, 0).document, undefined, 'the error is the whole file’s');
    assert.match(at(errors, 0).message, /more than 1000 documents/);
    // 10 MiB of bare markers: 2.6 million empty documents.
    assert.deepEqual(reasons('---\n'.repeat(2_600_000)), [['TooManyDocuments', undefined]]);
    // A stream of JSON documents is counted too.
    const json = JSON.stringify(JSON.parse(JSON.stringify({ apiVersion: 'v1', kind: 'Pod' })));
    assert.deepEqual(
      reasons(
        Array(MAX_DOCUMENTS + 1)
          .fill(json)
          .join('\n---\n'),
      ),
      [['TooManyDocuments', undefined]],
    );
  });

  test('the limit is exact: a first document without a marker counts, as do documents after `...`', () => {
    const notAPod = parseManifestFile('---\n[]\n'.repeat(MAX_DOCUMENTS), '/m/pods.yaml', 'n').errors;
    assert.equal(notAPod.length, MAX_DOCUMENTS, 'exactly the limit: every document is read');
    assert.ok(notAPod.every((e) => e.reason === 'NotAPod'));
    assert.deepEqual(reasons(`[]\n${'---\n[]\n'.repeat(MAX_DOCUMENTS)}`), [['TooManyDocuments', undefined]]);
    assert.deepEqual(reasons(`${'---\n[]\n'.repeat(MAX_DOCUMENTS)}...\n[]\n`), [
      ['TooManyDocuments', undefined],
    ]);
  });

  test('an empty file, or one of only comments and markers, is EmptyManifest, as kubelet refuses it', () => {
    for (const text of ['', '\n  \n', '# nothing yet\n', '---\n---\n# c\n']) {
      assert.deepEqual(reasons(text), [['EmptyManifest', undefined]], JSON.stringify(text));
    }
    // Empty documents beside a pod are still skipped, and an empty .json file does not parse.
    assert.deepEqual(reasons(`---\n${pod('one')}---\n`), []);
    assert.deepEqual(reasons('', '/m/pod.json'), [['ParseError', 1]]);
  });

  test('a document of 130,000 bad labels is one InvalidPod error naming the first 32 (it overflowed the stack)', () => {
    const labels = Object.fromEntries(Array.from({ length: 130_000 }, (_, i) => [`l${i}`, 1]));
    const doc = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'x', labels },
      spec: { containers: [{ name: 'a', image: 'b' }] },
    };
    const { errors } = parseManifestFile(JSON.stringify(doc), '/m/pod.json', 'n');
    assert.equal(errors.length, 1);
    assert.equal(at(errors, 0).reason, 'InvalidPod');
    const message = at(errors, 0).message;
    assert.match(message, /metadata\.labels\["l0"\]/);
    assert.match(message, /metadata\.labels\["l31"\]: [^;]*; and 129968 more$/);
    assert.doesNotMatch(message, /"l32"/);
  });

  test('broken documents far into a file still name their line', () => {
    const text = `${'---\nx: 1\n'.repeat(900)}---\nx: [\n---\ny: [\n`;
    const errors = parseManifestFile(text, '/m/pods.yaml', 'n').errors.filter(
      (e) => e.reason === 'ParseError',
    );
    assert.deepEqual(
      errors.map((e) => [e.document, e.message.match(/at line \d+/)?.[0]]),
      [
        [901, 'at line 1803'],
        [902, 'at line 1805'],
      ],
    );
  });
});

describe('staticPodUID', () => {
  const uidOf = (text: string, file = '/m/a.yaml', node = 'n') =>
    at(parseManifestFile(text, file, node).pods, 0).metadata?.uid;

  test('is 32 hex digits, like kubelet', () => {
    assert.match(uidOf(pod('web')) ?? '', /^[0-9a-f]{32}$/);
    assert.equal(uidOf(pod('web')), uidOf(pod('web')));
  });

  test('changes with any edit of the manifest, the node or the file path, as in kubelet', () => {
    const base = uidOf(pod('web'));
    assert.notEqual(uidOf(pod('web', '  labels: {x: z}\n')), base);
    assert.notEqual(uidOf(pod('web2')), base);
    assert.notEqual(uidOf(pod('web'), '/m/b.yaml'), base);
    assert.notEqual(uidOf(pod('web'), '/m/a.yaml', 'other'), base);
  });

  test('hashes the defaulted pod: spelling out a default does not change it', () => {
    const a = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'w' },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    });
    const b = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'w' },
      spec: { restartPolicy: 'Always', containers: [{ name: 'c', image: 'i' }] },
    });
    assert.equal(uidOf(a, '/m/a.json'), uidOf(b, '/m/a.json'));
  });

  test('an explicit metadata.uid is kept across edits', () => {
    const withUID = (labels: string) => pod('web', `  uid: fixed-uid-1\n${labels}`);
    assert.equal(uidOf(withUID('')), 'fixed-uid-1');
    assert.equal(uidOf(withUID('  labels: {x: z}\n')), 'fixed-uid-1');
  });
});
