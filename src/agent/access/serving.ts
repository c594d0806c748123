// How the HTTP port is served. On a loopback address: plain HTTP, no
// authentication (only local root-equivalent callers reach it, and `podvol
// status` keeps working). On any other address: TLS and kubelet-style
// authentication and authorization on every route but /healthz and /readyz.
// This module is the one place that decides which applies and with what.
import { readFile, stat } from 'node:fs/promises';
import type { Server as HttpsServer, ServerOptions } from 'node:https';
import { isIP } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import type { Logger } from '../../logger.ts';
import { createAuthenticator } from './authenticate.ts';
import { type AuthorizationMode, alwaysAllow, createWebhookAuthorizer } from './authorize.ts';
import { loadServingCert, servingHosts } from './certs.ts';
import { createGuard, type Guard } from './guard.ts';

export interface AccessOptions {
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  clientCaFile?: string;
  /** undefined: on when an API server is configured (KubeletConfiguration's default). */
  tokenWebhook?: boolean;
  tokenWebhookCacheTtlMs: number;
  /** undefined: Webhook when an API server is configured, else AlwaysAllow. */
  authorizationMode?: AuthorizationMode;
  authorizedTtlMs: number;
  unauthorizedTtlMs: number;
}

/** kubelet's defaults: token answers 2 min, authorized 5 min, unauthorized 30 s. */
export const ACCESS_DEFAULTS = {
  tokenWebhookCacheTtlMs: 120_000,
  authorizedTtlMs: 300_000,
  unauthorizedTtlMs: 30_000,
} as const;

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || /^::ffff:127\./i.test(host);
}

export type ResolvedAccess =
  | { secure: false }
  | {
      secure: true;
      tokenWebhook: boolean;
      authorizationMode: AuthorizationMode;
      clientCaFile?: string;
      tlsCertFile?: string;
      tlsPrivateKeyFile?: string;
    };

/** Applies the defaults and refuses contradictions; throws an Error whose message suits a usage error. */
export function resolveAccess(o: AccessOptions, listenHost: string, hasApiServer: boolean): ResolvedAccess {
  if (Boolean(o.tlsCertFile) !== Boolean(o.tlsPrivateKeyFile))
    throw new Error('--tls-cert-file and --tls-private-key-file go together: give both or neither');
  if (isLoopback(listenHost)) return { secure: false };
  const tokenWebhook = o.tokenWebhook ?? hasApiServer;
  const authorizationMode = o.authorizationMode ?? (hasApiServer ? 'Webhook' : 'AlwaysAllow');
  if (tokenWebhook && !hasApiServer)
    throw new Error(
      '--authentication-token-webhook needs an API server to send TokenReviews to (--kubeconfig)',
    );
  if (authorizationMode === 'Webhook' && !hasApiServer)
    throw new Error(
      '--authorization-mode=Webhook needs an API server to send SubjectAccessReviews to (--kubeconfig); without one use --authorization-mode=AlwaysAllow with --client-ca-file',
    );
  if (!tokenWebhook && !o.clientCaFile)
    throw new Error(
      `--listen ${listenHost} is not a loopback address, so callers must authenticate: enable --authentication-token-webhook (needs --kubeconfig) or give --client-ca-file, or listen on 127.0.0.1`,
    );
  return {
    secure: true,
    tokenWebhook,
    authorizationMode,
    clientCaFile: o.clientCaFile,
    tlsCertFile: o.tlsCertFile,
    tlsPrivateKeyFile: o.tlsPrivateKeyFile,
  };
}

export interface SecureServing {
  tls: ServerOptions;
  guard: Guard;
  /** Re-reads operator-given certificate and CA files when they change (rotation); returns a stop function. */
  watchFiles(server: HttpsServer, intervalMs?: number): () => void;
}

export async function createSecureServing(o: {
  access: AccessOptions;
  listenHost: string;
  rootDir: string;
  nodeName: string;
  kubeConfig?: KubeConfig;
  logger: Logger;
}): Promise<SecureServing | undefined> {
  const r = resolveAccess(o.access, o.listenHost, o.kubeConfig !== undefined);
  const log = o.logger.child({ component: 'access' });
  if (!r.secure) {
    if (o.access.tlsCertFile || o.access.clientCaFile)
      log.warn(
        { listen: o.listenHost },
        'listening on loopback: plain HTTP without authentication; TLS and client CA flags are not used',
      );
    return undefined;
  }
  const serving = await loadServingCert({
    certFile: r.tlsCertFile,
    keyFile: r.tlsPrivateKeyFile,
    rootDir: o.rootDir,
    nodeName: o.nodeName,
    hosts: servingHosts(o.nodeName, o.listenHost),
  });
  if (serving.generated)
    log.warn(
      { certFile: serving.certFile },
      'no --tls-cert-file given: serving with a self-signed certificate; clients cannot verify it unless they trust the CA in that file',
    );
  const readCA = async () => (r.clientCaFile ? await readFile(r.clientCaFile, 'utf8') : undefined);
  const ca = await readCA().catch((err: Error) => {
    throw new Error(`cannot read --client-ca-file: ${err.message}`);
  });
  // Imported only with a kubeconfig: the review client needs the Kubernetes client.
  const reviews = o.kubeConfig ? (await import('./reviews.ts')).createReviewClient(o.kubeConfig) : undefined;
  const authenticator = createAuthenticator({
    clientCertificates: ca !== undefined,
    reviews: r.tokenWebhook ? reviews : undefined,
    cacheTtlMs: o.access.tokenWebhookCacheTtlMs,
  });
  const authorizer =
    r.authorizationMode === 'Webhook' && reviews
      ? createWebhookAuthorizer({
          reviews,
          authorizedTtlMs: o.access.authorizedTtlMs,
          unauthorizedTtlMs: o.access.unauthorizedTtlMs,
        })
      : alwaysAllow;
  log.info(
    {
      certFile: serving.certFile,
      clientCA: r.clientCaFile ?? null,
      tokenWebhook: r.tokenWebhook,
      authorizationMode: r.authorizationMode,
    },
    'serving HTTPS with authentication and authorization',
  );
  // Ask for a client certificate only when one can be verified; a missing or bad one is
  // decided per request (401 unless a bearer token authenticates), not at the handshake.
  const tlsOptions = (cert: string, key: string, caPem: string | undefined): ServerOptions => ({
    cert,
    key,
    ...(caPem ? { ca: caPem, requestCert: true, rejectUnauthorized: false } : {}),
  });
  const tls = tlsOptions(serving.cert, serving.key, ca);
  const files = [
    ...(serving.generated ? [] : [serving.certFile, serving.keyFile]),
    ...(r.clientCaFile ? [r.clientCaFile] : []),
  ];
  return {
    tls,
    guard: createGuard({ nodeName: o.nodeName, authenticator, authorizer, logger: o.logger }),
    watchFiles(server, intervalMs = 60_000) {
      if (files.length === 0) return () => {};
      const fingerprint = async () =>
        (
          await Promise.all(
            files.map(async (f) => {
              const s = await stat(f);
              return `${s.ino}:${s.size}:${s.mtimeMs}`;
            }),
          )
        ).join('|');
      let last: Promise<string> = fingerprint().catch(() => '');
      const timer = setInterval(async () => {
        const before = await last;
        last = fingerprint().catch(() => before);
        if ((await last) === before) return;
        try {
          const cert = serving.generated ? serving.cert : await readFile(serving.certFile, 'utf8');
          const key = serving.generated ? serving.key : await readFile(serving.keyFile, 'utf8');
          server.setSecureContext(tlsOptions(cert, key, await readCA()));
          log.info({ files }, 'reloaded the serving certificate and client CA');
        } catch (err) {
          log.error(
            { err: errorMessage(err), files },
            'cannot reload the serving certificate or client CA; keeping the previous ones',
          );
        }
      }, intervalMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
