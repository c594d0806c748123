// Issue 21 finding 8: text from a pod (a hostPath, a subPathExpr's value) and
// from the operator's own arguments reaches the terminal escaped from every
// subcommand that prints it, on stdout and stderr, in every output format. A
// raw ESC or BEL there sets the window title and clears the screen; a C1 CSI
// (U+009B) or a carriage return rewrites what the operator reads.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type CliResult, runCli } from '../agent/ops/cli.ts';
import { runtimeSocketOf, startPodvol, waitFor } from '../helpers/daemon.ts';
import { mountTest, tempDir } from '../helpers/mountns.ts';

/** Set the title, clear the screen, a C1 CSI, a carriage return that hides what came before. */
const CONTROLS = '\x1b]0;pwned\x07\x1b[2J\x9b31m\rX';
/** Every C0 control but newline, DEL, and every C1 control: what escape.ts escapes. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

const manifest = (name: string, spec: Record<string, unknown>) =>
  JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default' }, spec });

// Its volume is ready; `app` mounts it at a path full of controls and a
// subdirectory named by such an expansion, `bad` an absolute expansion the runtime API refuses (422, the value in the message).
const ctlPod = manifest('ctl', {
  containers: [
    {
      name: 'app',
      image: 'busybox',
      env: [{ name: 'Y', value: CONTROLS }],
      volumeMounts: [
        { name: 'data', mountPath: '/data', subPathExpr: 'd$(Y)' },
        { name: 'data', mountPath: `/m${CONTROLS}` },
      ],
    },
    {
      name: 'bad',
      image: 'busybox',
      env: [{ name: 'X', value: `/${CONTROLS}` }],
      volumeMounts: [{ name: 'data', mountPath: '/d', subPathExpr: '$(X)' }],
    },
  ],
  volumes: [{ name: 'data', emptyDir: {} }],
});
// Never ready: its hostPath does not exist, and the volume's message names it.
const hostPod = manifest('host', {
  containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'host', mountPath: '/host' }] }],
  volumes: [{ name: 'host', hostPath: { path: `/nonexistent${CONTROLS}`, type: 'Directory' } }],
});

/** Nothing raw on either stream, and (when the command printed pod text) the escaped form is there. */
function assertEscaped(t: TestContext, what: string, r: CliResult, printsControls = true): void {
  const both = r.stdout + r.stderr;
  t.diagnostic(`${what}: exit ${r.code}: ${JSON.stringify(both.slice(0, 300))}`);
  assert.doesNotMatch(r.stdout, RAW_CONTROL, `${what}: a raw control character on stdout`);
  assert.doesNotMatch(r.stderr, RAW_CONTROL, `${what}: a raw control character on stderr`);
  if (printsControls) assert.match(both, /\\x1b|\\u001b/, `${what}: printed the pod's text, escaped`);
}

mountTest('every subcommand prints the control characters of a pod escaped', async (t) => {
  const base = await tempDir(t);
  const manifests = join(base, 'manifests');
  await mkdir(manifests);
  const root = join(base, 'root');
  await writeFile(join(manifests, 'ctl.json'), ctlPod);
  await writeFile(join(manifests, 'host.json'), hostPod);
  const socket = ['--runtime-socket', runtimeSocketOf(root)];

  for (const file of ['ctl.json', 'host.json']) {
    // plan shows volumes, not containers' subPaths: only the hostPath pod's text is in it.
    for (const o of [[], ['-o', 'json']])
      assertEscaped(
        t,
        `plan ${file} ${o}`,
        await runCli(['plan', '-f', join(manifests, file), ...o]),
        file === 'host.json',
      );
  }

  const p = await startPodvol({ rootDir: root, manifests });
  t.after(() => p.stop());
  const wait = await runCli(['wait', 'default/ctl-testnode', '--timeout', '2m', ...socket]);
  assert.equal(wait.code, 0, wait.stderr);
  await waitFor(
    'the hostPath volume to report its failure',
    async () => {
      const pods = ((await p.status()) as { pods?: { name: string; volumes: { message?: string }[] }[] })
        .pods;
      return pods?.find((x) => x.name === 'host-testnode')?.volumes[0]?.message;
    },
    120_000,
  );

  const waitHost = await runCli(['wait', 'default/host-testnode', '--timeout', '3s', ...socket]);
  assert.equal(waitHost.code, 1);
  assertEscaped(t, 'wait on the hostPath pod', waitHost);
  for (const o of ['table', 'json'])
    assertEscaped(
      t,
      `mounts -o ${o}`,
      await runCli(['mounts', 'default/ctl-testnode', '-c', 'app', '-o', o, ...socket]),
    );
  const refused = await runCli(['mounts', 'default/ctl-testnode', '-c', 'bad', ...socket]);
  assert.equal(refused.code, 1);
  assertEscaped(t, 'mounts refused (422)', refused);
  // The table has no message column; wide and json carry the hostPath's.
  for (const o of ['table', 'wide', 'json'])
    assertEscaped(t, `status -o ${o}`, await runCli(['status', '--server', p.url, '-o', o]), o !== 'table');

  assert.equal(await p.stop(), 0);
  // Drain prints what it finds under the root: names and paths podvol made from
  // validated names, so the controls here come from the operator's --root-dir.
  for (const o of ['text', 'json'])
    assertEscaped(
      t,
      `drain -o ${o}`,
      await runCli(['drain', '--dry-run', '--root-dir', root, '-o', o]),
      false,
    );
  assertEscaped(
    t,
    'drain of a root directory named with controls',
    await runCli(['drain', '--dry-run', '--root-dir', join(base, `gone${CONTROLS}`)]),
  );
});
