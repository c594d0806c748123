// The serving certificate of the HTTP port: --tls-cert-file and
// --tls-private-key-file when given; otherwise, as kubelet does without them,
// a self-signed CA and a serving certificate it signed, generated into
// <root-dir>/pki/podvol.crt (certificate, then CA) and podvol.key (0600), and
// reused on the next start until they are within 30 days of expiring.
import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import type forge from 'node-forge';

// node-forge is only needed to make a certificate, so it is loaded only then (it is large).
type Forge = typeof forge;
const loadForge = async (): Promise<Forge> => (await import('node-forge')).default;

export interface ServingCert {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
  /** True when podvol made it (self-signed), false when the operator gave the files. */
  generated: boolean;
}

const VALIDITY_MS = 365 * 24 * 3600 * 1000;
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

export function selfSignedPaths(rootDir: string): { certFile: string; keyFile: string } {
  return { certFile: join(rootDir, 'pki', 'podvol.crt'), keyFile: join(rootDir, 'pki', 'podvol.key') };
}

/** Names and addresses the generated certificate is valid for. */
export function servingHosts(nodeName: string, listenHost: string, extra: string[] = []): string[] {
  const hosts = new Set([nodeName, 'localhost', '127.0.0.1', '::1', ...extra]);
  if (listenHost !== '0.0.0.0' && listenHost !== '::' && listenHost !== '') hosts.add(listenHost);
  // A wildcard listener answers on every address of the host.
  else
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) hosts.add(a.address);
  return [...hosts].filter((h) => h !== '');
}

function newKeyPair(forge: Forge): forge.pki.rsa.KeyPair {
  // Node's native RSA key generation; forge only signs.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const priv = forge.pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }).toString());
  return { privateKey: priv, publicKey: forge.pki.setRsaPublicKey(priv.n, priv.e) };
}

function certificate(
  forge: Forge,
  o: {
    subject: string;
    issuer?: { cn: string; key: forge.pki.rsa.PrivateKey };
    keys: forge.pki.rsa.KeyPair;
    now: Date;
    ca: boolean;
    hosts?: string[];
  },
): forge.pki.Certificate {
  const c = forge.pki.createCertificate();
  c.publicKey = o.keys.publicKey;
  // A positive 128-bit serial.
  c.serialNumber = `01${randomBytes(16).toString('hex')}`;
  c.validity.notBefore = new Date(o.now.getTime() - 60_000);
  c.validity.notAfter = new Date(o.now.getTime() + VALIDITY_MS);
  c.setSubject([{ name: 'commonName', value: o.subject }]);
  c.setIssuer([{ name: 'commonName', value: o.issuer?.cn ?? o.subject }]);
  const ext: object[] = [{ name: 'basicConstraints', cA: o.ca, critical: true }];
  if (o.ca) {
    ext.push({
      name: 'keyUsage',
      keyCertSign: true,
      digitalSignature: true,
      keyEncipherment: true,
      critical: true,
    });
  } else {
    ext.push(
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: (o.hosts ?? []).map((h) => (isIP(h) ? { type: 7, ip: h } : { type: 2, value: h })),
      },
    );
  }
  c.setExtensions(ext);
  c.sign(o.issuer?.key ?? o.keys.privateKey, forge.md.sha256.create());
  return c;
}

/** kubelet's GenerateSelfSignedCertKey: a CA "<host>-ca@<unix>" and a serving certificate "<host>@<unix>". */
export async function generateSelfSigned(
  host: string,
  hosts: string[],
  now = new Date(),
): Promise<{ cert: string; key: string }> {
  const forge = await loadForge();
  const stamp = Math.floor(now.getTime() / 1000);
  const caKeys = newKeyPair(forge);
  const caCN = `${host}-ca@${stamp}`;
  const ca = certificate(forge, { subject: caCN, keys: caKeys, now, ca: true });
  const keys = newKeyPair(forge);
  const leaf = certificate(forge, {
    subject: `${host}@${stamp}`,
    issuer: { cn: caCN, key: caKeys.privateKey },
    keys,
    now,
    ca: false,
    hosts,
  });
  const key = forge.pki.privateKeyInfoToPem(
    forge.pki.wrapRsaPrivateKey(forge.pki.privateKeyToAsn1(keys.privateKey)),
  );
  return { cert: forge.pki.certificateToPem(leaf) + forge.pki.certificateToPem(ca), key };
}

async function readPair(certFile: string, keyFile: string): Promise<{ cert: string; key: string }> {
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  return { cert, key };
}

/** Whether a generated pair can be used again: readable, a certificate, not close to expiry, same names. */
async function reusable(certFile: string, keyFile: string, hosts: string[], now: number) {
  try {
    const pair = await readPair(certFile, keyFile);
    const x = new X509Certificate(pair.cert);
    if (Date.parse(x.validTo) - now < RENEW_BEFORE_MS) return undefined;
    const covered = hosts.every((h) => (isIP(h) ? x.checkIP(h) : x.checkHost(h, { subject: 'never' })));
    return covered ? pair : undefined;
  } catch {
    return undefined;
  }
}

export async function loadServingCert(o: {
  certFile?: string;
  keyFile?: string;
  rootDir: string;
  nodeName: string;
  hosts: string[];
  now?: () => number;
}): Promise<ServingCert> {
  if (o.certFile && o.keyFile) {
    const pair = await readPair(o.certFile, o.keyFile).catch((err: Error) => {
      throw new Error(`cannot read the serving certificate: ${err.message}`);
    });
    return { ...pair, certFile: o.certFile, keyFile: o.keyFile, generated: false };
  }
  const { certFile, keyFile } = selfSignedPaths(o.rootDir);
  const now = o.now?.() ?? Date.now();
  const existing = await reusable(certFile, keyFile, o.hosts, now);
  if (existing) return { ...existing, certFile, keyFile, generated: true };
  const pair = await generateSelfSigned(o.nodeName, o.hosts, new Date(now));
  await mkdir(join(o.rootDir, 'pki'), { recursive: true, mode: 0o700 });
  // Key first, each through a temporary file, so a crash never leaves a certificate without its key.
  for (const [file, data, mode] of [
    [keyFile, pair.key, 0o600],
    [certFile, pair.cert, 0o644],
  ] as const) {
    const tmp = `${file}.tmp-${process.pid}`;
    await rm(tmp, { force: true });
    await writeFile(tmp, data, { mode, flag: 'wx' });
    await rename(tmp, file);
  }
  return { ...pair, certFile, keyFile, generated: true };
}
