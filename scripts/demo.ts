// npm run demo: cluster mode without a cluster. The project's test API server
// (test/apiserver/, which defaults posted pods as the real one does) serves on
// loopback with a Node, a configMap, a secret and the default service account;
// a pod using them, an emptyDir and a projected token is posted; podvol runs in
// cluster mode against it with a root directory in a fresh temporary
// directory. It prints what to try, and on Ctrl-C (SIGINT or SIGTERM) stops
// podvol, drains what it mounted and removes the temporary directory.
//
// As root it runs inside a private mount namespace (unshare --mount
// --propagation private), so none of its mounts reaches the host's table.
// Inside one already (PODVOL_MOUNTNS=1, as npm test's) it stays there, so a
// test sees its mounts.
//
// --once runs the tour instead of waiting: pod mounted, configMap edited and
// the file on disk updated, pod deleted and its volumes unmounted; then it
// cleans up and exits 0 only if nothing is left mounted or on disk.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import type { StatusDocument } from '../src/agent/ops/status.ts';
import { errorMessage } from '../src/errno.ts';
import { readMountInfo } from '../src/mount/mountinfo.ts';
import { addNode } from '../test/apiserver/node.ts';
import { startTestApiServer, type TestApiServer } from '../test/apiserver/server.ts';
import { freePort, repoRoot, waitFor } from '../test/helpers/daemon.ts';
import { mountPointsAtOrBelow } from '../test/helpers/mounts.ts';

const NODE = 'podvol-demo';
const POD = 'demo';
const CONFIGMAP = 'demo-config';
const once = process.argv.includes('--once');
// A demo left running is not meant to outlive a working day; --once is a test's.
const runLimitMs = once ? 10 * 60_000 : 12 * 60 * 60_000;
const podvolBin = join(repoRoot, 'bin', 'podvol.js');

/** Shell-quotes an argv for printing, so a printed command can be pasted as it is. */
const shown = (argv: string[]) =>
  argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`)).join(' ');

async function outside(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      'npm run demo mounts volumes (tmpfs, bind mounts) as podvol does on a node: run it as root (sudo npm run demo); it runs in a private mount namespace, so nothing reaches the host\n',
    );
    return 1;
  }
  const child = execa(
    'unshare',
    ['--mount', '--propagation', 'private', '--', process.execPath, ...process.argv.slice(1)],
    {
      env: { PODVOL_MOUNTNS: '1' },
      stdio: 'inherit',
      reject: false,
      timeout: runLimitMs,
      forceKillAfterDelay: 60_000,
    },
  );
  // unshare execs node, so the child is the demo itself: it cleans up on these.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
  const r = await child;
  return r.exitCode ?? 1;
}

interface Demo {
  tmp: string;
  api?: TestApiServer;
  podvol?: ResultPromise;
  url?: string;
}

/** A request to the test API server, as a client with its CA and token makes it. */
function apiCall(api: TestApiServer, method: string, path: string, body?: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${api.url}${path}`,
      {
        method,
        ca: api.caCert,
        timeout: 10_000,
        headers: { authorization: `Bearer ${api.token}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 10 s`)));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

// As a user writes it: no defaultMode, no serviceAccountName, no expirationSeconds;
// the API server fills them in, as a real one does.
const demoPod = {
  metadata: { name: POD, namespace: 'default' },
  spec: {
    nodeName: NODE,
    containers: [
      {
        name: 'app',
        image: 'busybox',
        volumeMounts: ['config', 'creds', 'scratch', 'token'].map((name) => ({
          name,
          mountPath: `/${name}`,
        })),
      },
    ],
    volumes: [
      { name: 'config', configMap: { name: CONFIGMAP } },
      { name: 'creds', secret: { secretName: 'demo-secret' } },
      { name: 'scratch', emptyDir: {} },
      { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
    ],
  },
};

async function status(url: string): Promise<StatusDocument> {
  const res = await fetch(`${url}/status`, { signal: AbortSignal.timeout(10_000) });
  return (await res.json()) as StatusDocument;
}

async function startPodvol(d: Demo, kubeconfig: string): Promise<void> {
  const port = await freePort();
  d.url = `http://127.0.0.1:${port}`;
  const log = join(d.tmp, 'podvol.log');
  d.podvol = execa(
    process.execPath,
    [
      podvolBin,
      'run',
      '--kubeconfig',
      kubeconfig,
      '--node-name',
      NODE,
      '--root-dir',
      join(d.tmp, 'root'),
      '--listen',
      `127.0.0.1:${port}`,
      // Never the host's /run/podvol.
      '--runtime-socket',
      join(d.tmp, 'run', 'podvol.sock'),
      '--log-format',
      'text',
    ],
    { stdin: 'ignore', stdout: { file: log }, stderr: { file: log }, reject: false, timeout: runLimitMs },
  );
  const url = d.url;
  // podvol exiting during start-up (a bad flag, a locked root) ends the wait at once.
  const exited = d.podvol.then((r) => {
    throw new Error(`podvol exited (${r.exitCode ?? r.signal})`);
  });
  exited.catch(() => {});
  await Promise.race([
    exited,
    waitFor(
      'the demo pod to be mounted',
      async () => {
        const pod = (await status(url)).pods.find((p) => p.name === POD);
        return pod && pod.volumes.length === 4 && pod.volumes.every((v) => v.state === 'mounted')
          ? pod
          : false;
      },
      // Start-up on a loaded machine can take tens of seconds.
      120_000,
    ),
  ]).catch(async (err) => {
    throw new Error(`${errorMessage(err)}; podvol's log:\n${await readFile(log, 'utf8').catch(() => '')}`);
  });
}

async function volumePath(d: Demo, volume: string): Promise<string> {
  const pod = (await status(d.url ?? '')).pods.find((p) => p.name === POD);
  const v = pod?.volumes.find((x) => x.name === volume);
  if (!v) throw new Error(`volume ${volume} of pod ${POD} is not in /status`);
  return v.path;
}

/** The commands the demo offers: the configMap edit and the pod's deletion, as curl against the test API server. */
function commands(d: Demo, api: TestApiServer, ca: string) {
  const curl = (method: string, path: string, extra: string[] = []) => [
    'curl',
    '-sS',
    '--fail',
    '-o',
    '/dev/null',
    '--cacert',
    ca,
    '-H',
    `Authorization: Bearer ${api.token}`,
    '-X',
    method,
    ...extra,
    `${api.url}${path}`,
  ];
  return {
    status: ['podvol', 'status', '--server', d.url ?? ''],
    edit: curl('PATCH', `/api/v1/namespaces/default/configmaps/${CONFIGMAP}`, [
      '-H',
      'Content-Type: application/merge-patch+json',
      '-d',
      '{"data":{"greeting":"hello again"}}',
    ]),
    delete: curl('DELETE', `/api/v1/namespaces/default/pods/${POD}?gracePeriodSeconds=0`),
  };
}

async function tour(d: Demo, cmds: ReturnType<typeof commands>): Promise<void> {
  const run = async (label: string, argv: string[]) => {
    const [file = '', ...args] = argv;
    // `podvol` is this checkout's, whatever is on PATH.
    const r =
      file === 'podvol'
        ? await execa(process.execPath, [podvolBin, ...args], { reject: false, timeout: 60_000 })
        : await execa(file, args, { reject: false, timeout: 60_000 });
    process.stdout.write(`\n$ ${shown(argv)}    # ${label}\n${r.stdout}${r.stdout ? '\n' : ''}`);
    if (r.exitCode !== 0) throw new Error(`${label} failed (exit ${r.exitCode}): ${r.stderr}`);
  };
  await run('every volume and its state', cmds.status);
  const greeting = join(await volumePath(d, 'config'), 'greeting');
  await run('edit the configMap', cmds.edit);
  await waitFor(
    'the edited configMap on disk',
    async () => (await readFile(greeting, 'utf8')) === 'hello again',
  );
  process.stdout.write(`${greeting} now reads: hello again\n`);
  const podDir = join(d.tmp, 'root', 'pods');
  await run('delete the pod', cmds.delete);
  await waitFor(
    "the pod's volumes to be unmounted",
    async () =>
      !(await status(d.url ?? '')).pods.some((p) => p.name === POD) &&
      mountPointsAtOrBelow(podDir, await readMountInfo()).length === 0 &&
      (await readdir(podDir)).length === 0,
    60_000,
  );
  process.stdout.write("the pod's volumes are unmounted and its directory is gone\n");
}

/** Stops podvol, drains what it left mounted (stopping never unmounts), stops the API server, removes the temp dir. */
async function cleanUp(d: Demo): Promise<string[]> {
  const problems: string[] = [];
  if (d.podvol) {
    d.podvol.kill('SIGTERM');
    await d.podvol;
  }
  const root = join(d.tmp, 'root');
  if (mountPointsAtOrBelow(d.tmp, await readMountInfo()).length > 0) {
    const r = await execa(process.execPath, [podvolBin, 'drain', '--root-dir', root, '--timeout', '30s'], {
      reject: false,
      timeout: 90_000,
    });
    if (r.exitCode !== 0) problems.push(`podvol drain: ${r.stderr || r.stdout}`);
  }
  await d.api?.close();
  // What drain could not take down is detached, so the directory can go; named, it fails the run.
  for (const mp of mountPointsAtOrBelow(d.tmp, await readMountInfo())) {
    problems.push(`still mounted after drain: ${mp}`);
    await execa('umount', ['-l', mp], { reject: false, timeout: 10_000 });
  }
  await rm(d.tmp, { recursive: true, force: true, maxRetries: 3 });
  return problems;
}

async function inside(): Promise<number> {
  const d: Demo = { tmp: await mkdtemp(join(tmpdir(), 'podvol-demo-')) };
  let stopping: Promise<number> | undefined;
  const stop = (why: string) => {
    stopping ??= (async () => {
      process.stdout.write(`\n${why}: stopping podvol, unmounting, removing ${d.tmp}\n`);
      const problems = await cleanUp(d);
      for (const p of problems) process.stderr.write(`demo: ${p}\n`);
      if (problems.length === 0) process.stdout.write(`done: nothing left mounted, ${d.tmp} removed\n`);
      return problems.length === 0 ? 0 : 1;
    })();
    return stopping;
  };
  const signalled = new Promise<number>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => resolve(stop(sig)));
  });
  try {
    const api = await startTestApiServer({ user: `system:node:${NODE}` });
    d.api = api;
    // A Node and the default service account, as a fresh cluster has them.
    addNode(api.store, NODE);
    api.store.create('configmaps', {
      metadata: { name: CONFIGMAP, namespace: 'default' },
      data: { greeting: 'hello' },
    });
    api.store.create('secrets', {
      metadata: { name: 'demo-secret', namespace: 'default' },
      data: { password: Buffer.from('not-a-real-password').toString('base64') },
    });
    await apiCall(api, 'POST', '/api/v1/namespaces/default/pods', demoPod);
    const kubeconfig = await api.kubeconfigPath(d.tmp);
    const ca = join(d.tmp, 'ca.crt');
    await writeFile(ca, api.caCert);
    await startPodvol(d, kubeconfig);
    const cmds = commands(d, api, ca);
    process.stdout.write(`podvol runs in cluster mode; its pod ${POD} has every volume mounted:
  test API server  ${api.url} (kubeconfig ${kubeconfig})
  podvol           ${d.url}, root dir ${join(d.tmp, 'root')}, log ${join(d.tmp, 'podvol.log')}
  configMap file   ${join(await volumePath(d, 'config'), 'greeting')}
`);
    if (once) {
      await tour(d, cmds);
      return await stop('tour done');
    }
    process.stdout.write(`
Try, in another terminal (the mounts are in this demo's own mount namespace: sudo nsenter -t ${process.pid} -m ls <path> shows them):
  ${shown(cmds.status)}    # node_modules/.bin/node bin/podvol.js without podvol on PATH
  ${shown(cmds.edit)}
  ${shown(cmds.delete)}
Ctrl-C stops podvol, unmounts everything and removes ${d.tmp}.
`);
    return await signalled;
  } catch (err) {
    process.stderr.write(`demo: ${errorMessage(err)}\n`);
    await stop('failed');
    return 1;
  }
}

process.exitCode = process.env.PODVOL_MOUNTNS === '1' ? await inside() : await outside();
