// `podvol run`'s flags for access to the HTTP port, with kubelet's names and
// defaults, and their translation into the agent's AccessOptions.
import { InvalidArgumentError, Option } from 'commander';
import type { AuthorizationMode } from '../agent/access/authorize.ts';
import { ACCESS_DEFAULTS, type AccessOptions } from '../agent/access/serving.ts';
import { parseGoDuration } from './options.ts';

export interface AccessFlags {
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  clientCaFile?: string;
  authenticationTokenWebhook?: boolean;
  authenticationTokenWebhookCacheTtl: number;
  authorizationMode?: AuthorizationMode;
  authorizationWebhookCacheAuthorizedTtl: number;
  authorizationWebhookCacheUnauthorizedTtl: number;
}

// Like a Go bool flag: bare means true, =true/=false (and 1/0) as strconv.ParseBool.
const goBool = (v: string): boolean => {
  if (['true', 'TRUE', 'True', 't', 'T', '1'].includes(v)) return true;
  if (['false', 'FALSE', 'False', 'f', 'F', '0'].includes(v)) return false;
  throw new InvalidArgumentError(`want true or false, got "${v}"`);
};

const duration = (def: number, shown: string) => (o: Option) =>
  o.default(def, shown).argParser(parseGoDuration);

export function accessOptions(): Option[] {
  return [
    new Option(
      '--tls-cert-file <file>',
      'serving certificate (PEM, chain allowed) for a non-loopback --listen',
    ).env('PODVOL_TLS_CERT_FILE'),
    new Option('--tls-private-key-file <file>', 'private key of --tls-cert-file').env(
      'PODVOL_TLS_PRIVATE_KEY_FILE',
    ),
    new Option(
      '--client-ca-file <file>',
      'CA bundle: client certificates it signed authenticate as CN (user) and O (groups)',
    ).env('PODVOL_CLIENT_CA_FILE'),
    new Option(
      '--authentication-token-webhook [bool]',
      'check bearer tokens with a TokenReview (default: on when an API server is configured)',
    )
      .env('PODVOL_AUTHENTICATION_TOKEN_WEBHOOK')
      .preset('true')
      .argParser(goBool),
    duration(
      ACCESS_DEFAULTS.tokenWebhookCacheTtlMs,
      '2m0s',
    )(
      new Option(
        '--authentication-token-webhook-cache-ttl <duration>',
        'how long TokenReview answers are cached',
      ).env('PODVOL_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL'),
    ),
    new Option(
      '--authorization-mode <mode>',
      'AlwaysAllow or Webhook (SubjectAccessReview) (default: Webhook when an API server is configured)',
    )
      .env('PODVOL_AUTHORIZATION_MODE')
      .choices(['AlwaysAllow', 'Webhook']),
    duration(
      ACCESS_DEFAULTS.authorizedTtlMs,
      '5m0s',
    )(
      new Option(
        '--authorization-webhook-cache-authorized-ttl <duration>',
        'how long allowed SubjectAccessReview answers are cached',
      ).env('PODVOL_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL'),
    ),
    duration(
      ACCESS_DEFAULTS.unauthorizedTtlMs,
      '30s',
    )(
      new Option(
        '--authorization-webhook-cache-unauthorized-ttl <duration>',
        'how long denied SubjectAccessReview answers are cached',
      ).env('PODVOL_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL'),
    ),
  ];
}

export function toAccessOptions(f: AccessFlags): AccessOptions {
  return {
    tlsCertFile: f.tlsCertFile,
    tlsPrivateKeyFile: f.tlsPrivateKeyFile,
    clientCaFile: f.clientCaFile,
    tokenWebhook: f.authenticationTokenWebhook,
    tokenWebhookCacheTtlMs: f.authenticationTokenWebhookCacheTtl,
    authorizationMode: f.authorizationMode,
    authorizedTtlMs: f.authorizationWebhookCacheAuthorizedTtl,
    unauthorizedTtlMs: f.authorizationWebhookCacheUnauthorizedTtl,
  };
}
