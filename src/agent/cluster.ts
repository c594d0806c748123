import type { Logger } from 'pino';
import type { RunOptions } from './daemon.ts';

export async function connectCluster(_o: {
  kubeconfig?: string;
  nodeName: string;
  logger: Logger;
}): Promise<RunOptions['cluster']> {
  throw new Error('cluster mode is not wired yet');
}
