// client-node 2 gives every API request its own undici Agent, so each list,
// TokenRequest or Event opens (and TLS-handshakes) a new connection: 3 per pod
// for a pod with a configMap, a secret and a token, plus the handshake's CPU
// on the API server. This KubeConfig keeps one keep-alive connection pool for
// plain requests, as client-go's transport does. Watches keep a connection of
// their own each (client-node's per-request Agent): a watch that went silent
// is abandoned by the reflector's watchdog, and a pool shared with it was
// what broke that restart when it was tried before (see README, Performance).
import { createHash } from 'node:crypto';
import type { RequestOptions } from 'node:https';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { Agent } from 'undici';

const isWatch = (url: string) => new URL(url).searchParams.get('watch') === 'true';

export class PooledKubeConfig extends KubeConfig {
  /** The pool, and the TLS material it was made for (a rotated certificate gets a new pool). */
  #pool: { key: string; agent: Agent } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    // Headers (tokens, exec plugins, basic auth) exactly as client-node sets them, and its own dispatcher.
    await super.applySecurityAuthentication(context);
    if (isWatch(context.getUrl())) return;
    // The TLS material of this request, read the same way (certificate files are re-read each time).
    const https: RequestOptions = {};
    await this.applyToHTTPSOptions(https);
    const options = this.createDispatcherOptions(this.getCurrentCluster(), {
      ca: https.ca,
      cert: https.cert,
      key: https.key,
      pfx: https.pfx,
      passphrase: https.passphrase,
      rejectUnauthorized: https.rejectUnauthorized,
      servername: https.servername,
    });
    // Proxies keep client-node's per-request dispatcher.
    if (options.type !== 'agent') return;
    const key = createHash('sha256').update(JSON.stringify(options.connect)).digest('hex');
    if (this.#pool?.key !== key) {
      // Requests still running on the old pool finish there; it closes after them.
      void this.#pool?.agent.close().catch(() => {});
      this.#pool = { key, agent: new Agent({ connect: options.connect }) };
    }
    context.setDispatcher(this.#pool.agent);
  }

  /** Closes the pooled connections once their requests are done (idle ones do not hold the process). */
  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.agent.close();
  }
}
