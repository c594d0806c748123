// client-node 2 gives every API request its own undici Agent, so each list,
// TokenRequest or Event opens (and TLS-handshakes) a new connection: 3 per pod
// for a pod with a configMap, a secret and a token, plus the handshake's CPU
// on the API server. This KubeConfig keeps one keep-alive connection pool for
// plain requests, as client-go's transport does. Watches keep a connection of
// their own each (client-node's per-request Agent): a watch that went silent
// is abandoned by the reflector's watchdog, and a pool shared with it was
// what broke that restart when it was tried before (see README, Performance).
// Every connection, pooled or a watch's, is made by one connector per TLS
// material: one SecureContext (client-node's options made a new one, CA,
// certificate and key parsed again, for every connection) and one TLS session
// cache, so a watch's handshake resumes a session instead of a full one.
import { createHash } from 'node:crypto';
import type { RequestOptions } from 'node:https';
import { createSecureContext } from 'node:tls';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { Agent, buildConnector } from 'undici';

const isWatch = (url: string) => new URL(url).searchParams.get('watch') === 'true';

export class PooledKubeConfig extends KubeConfig {
  /**
   * The pool and the connector of its connections and the watches', and the TLS material they were made
   * for (a rotated certificate gets new ones).
   */
  #pool: { key: string; agent: Agent; connect: buildConnector.connector } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    // Headers (tokens, exec plugins, basic auth) exactly as client-node sets them, and its own dispatcher.
    await super.applySecurityAuthentication(context);
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
      const { ca, cert, key: privateKey, pfx, passphrase, ...rest } = options.connect;
      const secureContext = createSecureContext({ ca, cert, key: privateKey, pfx, passphrase });
      const connect = buildConnector({ ...rest, secureContext });
      this.#pool = { key, agent: new Agent({ connect }), connect };
    }
    // A watch: an Agent (so a connection) of its own, as client-node gives it, over the shared connector.
    context.setDispatcher(
      isWatch(context.getUrl()) ? new Agent({ connect: this.#pool.connect }) : this.#pool.agent,
    );
  }

  /** Closes the pooled connections once their requests are done (idle ones do not hold the process). */
  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.agent.close();
  }
}
