// P2's floor: the least a node agent must do to take a pod of the shared shape
// from the API server to its volumes on disk, run as a process of its own the
// way podvol runs: one GET of the shared configMap at start, a list and a
// watch of the node's pods through @kubernetes/client-node, and for each added
// pod the fixed steps of baseline.ts (sharedShapeSteps) as synchronous
// syscalls and one mount(8), started with posix_spawn (the native/spawn
// binding, the cheapest way to start a process; Node's fork-based spawn
// without it) and waited for without blocking the next pod's watch event. It
// prints `ready` once the watch is open, then one line per pod set up (`done
// <namespace>/<name>`), which the bench times on arrival as it times podvol's
// log lines. None of podvol's code runs here but its addon loader.
// Run by bench/pod-latency.bench.ts: node bench/p2-floor.ts <kubeconfig> <root> <node> <configMap name>
import { spawn } from 'node:child_process';
import * as k8s from '@kubernetes/client-node';
import { loadAddon } from '../src/addon.ts';
import { fsStep, mountArgs, sharedShapeSteps } from './baseline.ts';

const [kubeconfig, root, node, configMap] = process.argv.slice(2);
if (!kubeconfig || !root || !node || !configMap)
  throw new Error('usage: p2-floor.ts <kubeconfig> <root> <node> <configMap name>');

const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const cm = await core.readNamespacedConfigMap({ name: configMap, namespace: 'default' });
const data = cm.data ?? {};

type Spawn = {
  start(file: string, argv: string[], env: string[], done: (code: number | null) => void): unknown;
};
const addon = (() => {
  try {
    return loadAddon<Spawn>('spawn');
  } catch {
    return undefined;
  }
})();
const env = Object.entries(process.env).map(([k, v]) => `${k}=${v}`);
/** Runs `file args` to its exit; rejects unless it exits 0. */
const run = (file: string, args: string[]) =>
  new Promise<void>((resolve, reject) => {
    const done = (code: number | null) =>
      code === 0 ? resolve() : reject(new Error(`${file} ${args.join(' ')} exited ${code}`));
    if (addon) addon.start(file, [file, ...args], env, done);
    else spawn(file, args, { stdio: 'ignore' }).once('exit', done);
  });

const seen = new Set<string>();
const setUp = async (pod: k8s.V1Pod) => {
  const uid = pod.metadata?.uid;
  if (!uid || seen.has(uid)) return;
  seen.add(uid);
  for (const step of sharedShapeSteps(root, uid, data)) {
    if (step.phase !== 'setup') continue;
    if (step.action === 'mount') await run('mount', mountArgs(step));
    else fsStep(step);
  }
  process.stdout.write(`done ${pod.metadata?.namespace}/${pod.metadata?.name}\n`);
};
const fail = (err: unknown) => {
  console.error(`p2-floor: ${String(err)}`);
  process.exit(1);
};

const fieldSelector = `spec.nodeName=${node}`;
const list = await core.listPodForAllNamespaces({ fieldSelector });
for (const pod of list.items) setUp(pod).catch(fail);
await new k8s.Watch(kc).watch(
  '/api/v1/pods',
  { fieldSelector, resourceVersion: list.metadata?.resourceVersion },
  (type, pod: k8s.V1Pod) => {
    if (type === 'ADDED') setUp(pod).catch(fail);
  },
  // The bench stops the floor by killing it; a watch that ends before that is a failed run.
  (err) => fail(`the watch ended: ${String(err)}`),
);
process.stdout.write('ready\n');
