// Shared setup for the cluster-mode tests: a test API server and a KubeConfig
// loaded from the kubeconfig file it writes, both torn down after the test.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/volumehost/kube/config.ts';
import { startTestApiServer, type TestApiServer, type TestApiServerOptions } from '../../apiserver/server.ts';

export interface KubeEnv {
  api: TestApiServer;
  kc: KubeConfig;
  dir: string;
}

export async function kubeEnv(t: TestContext, opts: TestApiServerOptions = {}): Promise<KubeEnv> {
  const api = await startTestApiServer(opts);
  const dir = await mkdtemp(join(tmpdir(), 'podvol-kube-'));
  t.after(async () => {
    await api.close();
    await rm(dir, { recursive: true, force: true });
  });
  const kc = loadKubeConfig({ kubeconfig: await api.kubeconfigPath(dir) });
  return { api, kc, dir };
}

/** Poll until `cond` holds; fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
