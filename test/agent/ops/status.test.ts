// `podvol status` against a stand-in daemon that serves a canned /status.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { escapeControl, escapeControlJSON } from '../../../src/agent/ops/escape.ts';
import { formatStatus, normalizeServer, type StatusDocument } from '../../../src/agent/ops/status.ts';
import { freePort } from '../../helpers/daemon.ts';
import { listenLocal } from '../../helpers/listen.ts';
import { at } from '../../helpers/must.ts';
import { runCli } from './cli.ts';

const doc: StatusDocument = {
  node: 'testnode',
  pods: [
    {
      namespace: 'default',
      name: 'web-testnode',
      uid: '5f0c7c3e-1111-8222-8333-444455556666',
      volumes: [
        {
          name: 'cache',
          plugin: 'kubernetes.io/empty-dir',
          state: 'mounted',
          path: '/var/lib/podvol/pods/5f0c/volumes/kubernetes.io~empty-dir/cache',
          reason: '',
          message: '',
          attempts: 1,
        },
        {
          name: 'data',
          plugin: 'kubernetes.io/host-path',
          state: 'failed',
          path: '/srv/data',
          reason: 'HostPathTypeMismatch',
          message: "hostPath type check failed: /srv/data is not a directory, it's a File",
          attempts: 4,
        },
      ],
    },
    {
      namespace: 'kube-system',
      name: 'gone',
      uid: '0a1b',
      volumes: [
        {
          name: 'token',
          plugin: 'kubernetes.io/projected',
          state: 'unmounting',
          path: '/var/lib/podvol/pods/0a1b/volumes/kubernetes.io~projected/token',
          reason: '',
          message: '',
          attempts: 0,
        },
      ],
    },
    {
      namespace: '',
      name: '',
      uid: '9f9f',
      volumes: [],
      message: 'refusing to remove /var/lib/podvol/pods/9f9f',
    },
  ],
  errors: [
    {
      source: 'file',
      file: '/etc/podvol/bad.yaml',
      document: 2,
      reason: 'NotAPod',
      message: 'kind "Deployment": only apiVersion "v1", kind "Pod" documents are static pods',
    },
  ],
};

// Pinned character for character: kubectl's layout, three spaces between columns.
const expectedTable = `NAMESPACE     POD            VOLUME   PLUGIN                    STATE        AGE         REASON
default       web-testnode   cache    kubernetes.io/empty-dir   mounted      <unknown>   <none>
default       web-testnode   data     kubernetes.io/host-path   failed       <unknown>   HostPathTypeMismatch
kube-system   gone           token    kubernetes.io/projected   unmounting   <unknown>   <none>
<none>        9f9f           <none>   <none>                    <none>       <unknown>   <none>

ERRORS:
  file /etc/podvol/bad.yaml document 2: NotAPod: kind "Deployment": only apiVersion "v1", kind "Pod" documents are static pods
  pod 9f9f: refusing to remove /var/lib/podvol/pods/9f9f
`;

describe('podvol status', () => {
  let server: Server;
  let url: string;
  let respond: (res: import('node:http').ServerResponse) => void;
  const requests: string[] = [];

  before(async () => {
    server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      respond(res);
    });
    url = `http://127.0.0.1:${await listenLocal(server)}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const serve = (code: number, body: string, type = 'application/json') => {
    respond = (res) => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
  };

  test('prints a kubectl-style table of every volume, then the source errors', async () => {
    serve(200, JSON.stringify(doc, null, 2));
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
    assert.equal(r.stdout, expectedTable);
    assert.equal(requests.at(-1), 'GET /status');
  });

  test('the server comes from PODVOL_SERVER when --server is not given', async () => {
    serve(200, JSON.stringify(doc));
    const r = await runCli(['status'], { PODVOL_SERVER: url });
    assert.equal(r.code, 0);
    assert.equal(r.stdout, expectedTable);
  });

  test('-o json prints the document exactly as the daemon sent it', async () => {
    const body = `${JSON.stringify(doc, null, 2)}\n`;
    serve(200, body);
    const r = await runCli(['status', '--server', url, '-o', 'json']);
    assert.equal(r.code, 0);
    assert.equal(r.stdout, body);
  });

  test('-o wide adds the path, the attempts and the message', async () => {
    serve(200, JSON.stringify(doc));
    const r = await runCli(['status', '--server', url, '-o', 'wide']);
    assert.equal(r.code, 0);
    const lines = r.stdout.split('\n');
    assert.match(
      at(lines, 0),
      /^NAMESPACE +POD +VOLUME +PLUGIN +STATE +AGE +REASON +PATH +ATTEMPTS +MESSAGE$/,
    );
    assert.match(
      at(lines, 2),
      /^default +web-testnode +data +kubernetes\.io\/host-path +failed +<unknown> +HostPathTypeMismatch +\/srv\/data +4 +hostPath type check failed: \/srv\/data is not a directory, it's a File$/,
    );
  });

  test('a node without pods says so on stderr and prints nothing on stdout', async () => {
    serve(200, JSON.stringify({ node: 'testnode', pods: [], errors: [] }));
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.code, 0);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'No pods on node testnode.\n');
  });

  test('a teardown hold is shown under the table, not only in -o json', async () => {
    const message =
      'the first sync would tear down 2 of 2 volumes adopted at start; held until 2026-11-30T12:00:30.000Z, then checked again';
    const hold = {
      since: '2026-11-30T12:00:00.000Z',
      until: '2026-11-30T12:00:30.000Z',
      volumes: 2,
      adopted: 2,
    };
    serve(200, JSON.stringify({ ...doc, teardownHold: { ...hold, message } }));
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.code, 0);
    const [table, holdPart, errorsPart] = r.stdout.split('\n\n');
    assert.equal(`${table}\n\n${errorsPart}`, expectedTable);
    assert.equal(holdPart, `TEARDOWN HOLD:\n  ${message} (see --teardown-settle-period)`);
    // A hold with nothing else to show (every adopted pod gone from the sources) is shown too.
    serve(
      200,
      JSON.stringify({ node: 'testnode', pods: [], errors: [], teardownHold: { ...hold, message } }),
    );
    const empty = await runCli(['status', '--server', url]);
    assert.equal(empty.stderr, 'No pods on node testnode.\n');
    assert.equal(empty.stdout, `TEARDOWN HOLD:\n  ${message} (see --teardown-settle-period)\n`);
  });

  test('two pods of the same namespace and name are told apart by their UID', async () => {
    const volume = {
      name: 'cache',
      plugin: 'kubernetes.io/empty-dir',
      state: 'mounted' as const,
      path: '/p',
      reason: '' as const,
      message: '',
      attempts: 0,
    };
    serve(
      200,
      JSON.stringify({
        node: 'testnode',
        errors: [],
        pods: [
          { namespace: 'default', name: 'web', uid: 'aaaa', volumes: [volume] },
          { namespace: 'default', name: 'web', uid: 'bbbb', volumes: [{ ...volume, state: 'unmounting' }] },
          { namespace: 'other', name: 'web', uid: 'cccc', volumes: [volume] },
        ],
      }),
    );
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.code, 0);
    assert.equal(
      r.stdout,
      `NAMESPACE   POD              VOLUME   PLUGIN                    STATE        AGE         REASON
default     web (uid aaaa)   cache    kubernetes.io/empty-dir   mounted      <unknown>   <none>
default     web (uid bbbb)   cache    kubernetes.io/empty-dir   unmounting   <unknown>   <none>
other       web              cache    kubernetes.io/empty-dir   mounted      <unknown>   <none>
`,
    );
  });

  test('an HTTP error from the daemon is exit code 3 with the status and body', async () => {
    serve(500, 'volume manager not started\n', 'text/plain');
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.code, 3);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      `podvol status: podvol at ${url} answered 500 Internal Server Error for /status: volume manager not started\n`,
    );
  });

  test('something that is not podvol is exit code 3', async () => {
    serve(200, '{"kind":"Status"}');
    const r = await runCli(['status', '--server', url]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /^podvol status: podvol at .* sent a \/status without a "pods" list/);
  });
});

test('no daemon listening: a one-line message and exit code 3', async () => {
  const port = await freePort();
  const r = await runCli(['status', '--server', `127.0.0.1:${port}`]);
  assert.equal(r.code, 3);
  assert.equal(r.stdout, '');
  assert.equal(
    r.stderr,
    `podvol status: cannot reach podvol at http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
  );
});

test('an unknown -o is a usage error (exit code 2)', async () => {
  const r = await runCli(['status', '-o', 'yaml']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /argument 'yaml' is invalid\. Allowed choices are table, wide, json/);
});

test('a server that is not an http(s) URL is a usage error (exit code 2)', async () => {
  const r = await runCli(['status', '--server', 'ftp://example.com']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /invalid server URL "ftp:\/\/example\.com": only http and https are supported/);
});

test('server URLs: http:// is assumed, a trailing slash dropped', () => {
  assert.equal(normalizeServer('127.0.0.1:10280'), 'http://127.0.0.1:10280');
  assert.equal(normalizeServer('https://node1:10280/'), 'https://node1:10280');
  assert.equal(normalizeServer('http://proxy/podvol/'), 'http://proxy/podvol');
});

test('cells are padded to the widest cell of their column, whatever the column', () => {
  const out = formatStatus(
    {
      node: 'n',
      pods: [
        {
          namespace: 'a-very-long-namespace-name',
          name: 'p',
          uid: 'u',
          volumes: [
            { name: 'v', plugin: 'x/y', state: 'pending', path: '', reason: '', message: '', attempts: 0 },
          ],
        },
      ],
      errors: [],
    },
    'table',
  );
  assert.equal(
    out,
    'NAMESPACE                    POD   VOLUME   PLUGIN   STATE     AGE         REASON\n' +
      'a-very-long-namespace-name   p     v        x/y      pending   <unknown>   <none>\n',
  );
});

test("AGE counts from the volume's since, as kubectl prints durations", async () => {
  const { humanDuration, formatStatus } = await import('../../../src/agent/ops/status.ts');
  assert.deepEqual(
    [
      5_000,
      119_000,
      125_000,
      600_000,
      3 * 3600_000 + 60_000,
      9 * 3600_000,
      50 * 3600_000,
      30 * 86400_000,
    ].map(humanDuration),
    ['5s', '119s', '2m5s', '10m', '3h1m', '9h', '2d2h', '30d'],
  );
  const now = Date.parse('2026-11-30T12:00:00Z');
  const doc = {
    node: 'n',
    errors: [],
    pods: [
      {
        namespace: 'default',
        name: 'web',
        uid: 'u',
        volumes: [
          {
            name: 'data',
            plugin: 'kubernetes.io/empty-dir',
            state: 'mounted',
            path: '/p',
            reason: '',
            message: '',
            attempts: 0,
            since: '2026-11-30T11:57:00Z',
          },
        ],
      },
    ],
  };
  assert.match(formatStatus(doc as never, 'table', now), /mounted {3}3m {3}/);
});

test('finding 8: control characters from pods reach the terminal escaped, in every format', () => {
  const evil = '/srv/\u001b]0;pwned\u0007\u001b[2J\u009b31mdata';
  const doc = {
    node: 'n',
    pods: [
      {
        namespace: 'default',
        name: 'p\u001b[31m',
        uid: 'u',
        volumes: [
          {
            name: 'v',
            plugin: 'kubernetes.io/host-path',
            state: 'failed' as const,
            path: evil,
            reason: 'HostPathTypeMismatch' as const,
            message: `hostPath type check failed: ${evil} is not a directory`,
            attempts: 1,
          },
        ],
      },
    ],
    errors: [],
  };
  for (const format of ['table', 'wide'] as const) {
    const out = escapeControl(formatStatus(doc, format));
    assert.doesNotMatch(out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, format);
    if (format === 'wide') assert.match(out, /\/srv\/\\x1b\]0;pwned\\x07\\x1b\[2J\\x9b31mdata/);
  }
  const json = escapeControlJSON(JSON.stringify(doc));
  assert.doesNotMatch(json, /[\u0000-\u001f\u007f-\u009f]/);
  assert.deepEqual(JSON.parse(json), doc, 'the JSON still reads back to the same document');
});
