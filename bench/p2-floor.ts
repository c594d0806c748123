// P2's floor: the least a node agent must do to take a pod of the shared shape
// from the API server to its volumes on disk, run as a process of its own the
// way podvol runs: one GET of the shared configMap at start, a list and a
// watch of the node's pods through @kubernetes/client-node, and for each added
// pod the fixed steps of baseline.ts (sharedShapeSteps) as synchronous
// syscalls and one mount(8). It prints `ready` once the watch is open, then one
// line per pod set up (`done <namespace>/<name>`), which the bench times on
// arrival as it times podvol's log lines. Nothing here is podvol's code.
// Run by bench/pod-latency.bench.ts: node bench/p2-floor.ts <kubeconfig> <root> <node> <configMap name>
import * as k8s from '@kubernetes/client-node';
import { bareLoop, sharedShapeSteps } from './baseline.ts';

const [kubeconfig, root, node, configMap] = process.argv.slice(2);
if (!kubeconfig || !root || !node || !configMap)
  throw new Error('usage: p2-floor.ts <kubeconfig> <root> <node> <configMap name>');

const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const cm = await core.readNamespacedConfigMap({ name: configMap, namespace: 'default' });
const data = cm.data ?? {};

const seen = new Set<string>();
const setUp = (pod: k8s.V1Pod) => {
  const uid = pod.metadata?.uid;
  if (!uid || seen.has(uid)) return;
  seen.add(uid);
  bareLoop(sharedShapeSteps(root, uid, data), 'setup');
  process.stdout.write(`done ${pod.metadata?.namespace}/${pod.metadata?.name}\n`);
};

const fieldSelector = `spec.nodeName=${node}`;
const list = await core.listPodForAllNamespaces({ fieldSelector });
for (const pod of list.items) setUp(pod);
await new k8s.Watch(kc).watch(
  '/api/v1/pods',
  { fieldSelector, resourceVersion: list.metadata?.resourceVersion },
  (type, pod: k8s.V1Pod) => {
    if (type === 'ADDED') setUp(pod);
  },
  (err) => {
    // The bench stops the floor by killing it; a watch that ends before that is a failed run.
    console.error(`p2-floor: the watch ended: ${String(err)}`);
    process.exit(1);
  },
);
process.stdout.write('ready\n');
