// Where the agent's API credentials come from: an explicit --kubeconfig, else
// $KUBECONFIG, else the in-cluster service account. Unlike
// KubeConfig.loadFromDefault we never read ~/.kube/config (a node agent must
// not pick up whoever's admin config happens to be there) and never fall back
// silently to http://localhost:8080: no configuration is an error.
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { PooledKubeConfig } from './pooled-config.ts';

export interface LoadKubeConfigOptions {
  /** Path to a kubeconfig file (--kubeconfig); wins over everything else. */
  kubeconfig?: string;
  /** Environment to read KUBECONFIG / KUBERNETES_SERVICE_HOST from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Prefix for /var/run/secrets/kubernetes.io/serviceaccount (tests point it elsewhere). */
  inClusterPathPrefix?: string;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-node's silent fallback when it finds nothing. */
const FALLBACK_SERVER = 'http://localhost:8080';

function fromFiles(files: string[], origin: string): KubeConfig {
  const kc = new PooledKubeConfig();
  for (const [i, file] of files.entries()) {
    if (!existsSync(file)) throw new Error(`${origin}: kubeconfig file ${file} does not exist`);
    try {
      if (i === 0) kc.loadFromFile(file);
      else {
        const more = new KubeConfig();
        more.loadFromFile(file);
        kc.mergeConfig(more, true);
      }
    } catch (err) {
      throw new Error(`${origin}: cannot load kubeconfig ${file}: ${errorMessage(err)}`);
    }
  }
  return kc;
}

function inCluster(env: NodeJS.ProcessEnv, prefix: string): KubeConfig | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) return undefined;
  const tokenFile = join(prefix, SA_DIR, 'token');
  if (!existsSync(tokenFile)) {
    throw new Error(
      `in-cluster config: KUBERNETES_SERVICE_HOST is set but the service account token ${tokenFile} does not exist (is automountServiceAccountToken off?)`,
    );
  }
  if (!env.KUBERNETES_SERVICE_PORT) {
    throw new Error('in-cluster config: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not');
  }
  // loadFromCluster reads process.env; give it the environment we were handed.
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  process.env.KUBERNETES_SERVICE_HOST = host;
  process.env.KUBERNETES_SERVICE_PORT = env.KUBERNETES_SERVICE_PORT;
  try {
    const kc = new PooledKubeConfig();
    kc.loadFromCluster(prefix);
    return kc;
  } finally {
    for (const [k, v] of [
      ['KUBERNETES_SERVICE_HOST', saved.host],
      ['KUBERNETES_SERVICE_PORT', saved.port],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

function validate(kc: KubeConfig, origin: string): KubeConfig {
  const context = kc.getCurrentContext();
  if (!context) throw new Error(`${origin}: no current-context set`);
  if (!kc.getContextObject(context))
    throw new Error(`${origin}: current-context "${context}" is not defined`);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`${origin}: context "${context}" names a cluster that is not defined`);
  if (!cluster.server) throw new Error(`${origin}: cluster "${cluster.name}" has no server`);
  if (cluster.server === FALLBACK_SERVER) {
    throw new Error(
      `${origin}: the API server is ${FALLBACK_SERVER}, client-node's placeholder for "no configuration"`,
    );
  }
  return kc;
}

/**
 * Loads the API configuration from `kubeconfig`, else $KUBECONFIG (a
 * path-list, merged like kubectl), else the in-cluster service account.
 * Throws a clear error when none yields a real server.
 */
export function loadKubeConfig(opts: LoadKubeConfigOptions = {}): KubeConfig {
  const env = opts.env ?? process.env;
  if (opts.kubeconfig)
    return validate(fromFiles([opts.kubeconfig], '--kubeconfig'), `kubeconfig ${opts.kubeconfig}`);
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  if (list.length > 0) return validate(fromFiles(list, 'KUBECONFIG'), `KUBECONFIG=${env.KUBECONFIG}`);
  const kc = inCluster(env, opts.inClusterPathPrefix ?? '');
  if (kc) return validate(kc, 'in-cluster config');
  throw new Error(
    'no Kubernetes API configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account (KUBERNETES_SERVICE_HOST is not set)',
  );
}
