// Throwaway certificate authorities and client certificates for tests of the
// HTTP port's client-certificate authentication.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';

export interface Issued {
  cert: string;
  key: string;
}

function keyPair() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const priv = forge.pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }) as string);
  return { privateKey: priv, publicKey: forge.pki.setRsaPublicKey(priv.n, priv.e) };
}

export interface TestCA extends Issued {
  /** A client certificate for `cn` in groups `o` (extended key usage clientAuth unless told otherwise). */
  client(
    cn: string,
    o?: string[],
    opts?: { extKeyUsage?: 'clientAuth' | 'serverAuth'; expired?: boolean },
  ): Issued;
}

export function createTestCA(name = 'podvol-test-client-ca'): TestCA {
  const caKeys = keyPair();
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = `01${randomBytes(8).toString('hex')}`;
  ca.validity.notBefore = new Date(Date.now() - 3600_000);
  ca.validity.notAfter = new Date(Date.now() + 24 * 3600_000);
  ca.setSubject([{ name: 'commonName', value: name }]);
  ca.setIssuer([{ name: 'commonName', value: name }]);
  ca.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, digitalSignature: true, critical: true },
  ]);
  ca.sign(caKeys.privateKey, forge.md.sha256.create());
  return {
    cert: forge.pki.certificateToPem(ca),
    key: forge.pki.privateKeyToPem(caKeys.privateKey),
    client(cn, o = [], opts = {}) {
      const keys = keyPair();
      const c = forge.pki.createCertificate();
      c.publicKey = keys.publicKey;
      c.serialNumber = `01${randomBytes(8).toString('hex')}`;
      c.validity.notBefore = new Date(Date.now() - (opts.expired ? 48 : 1) * 3600_000);
      c.validity.notAfter = new Date(Date.now() + (opts.expired ? -24 : 24) * 3600_000);
      c.setSubject([
        { name: 'commonName', value: cn },
        ...o.map((value) => ({ name: 'organizationName', value })),
      ]);
      c.setIssuer(ca.subject.attributes);
      c.setExtensions([
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        (opts.extKeyUsage ?? 'clientAuth') === 'clientAuth'
          ? { name: 'extKeyUsage', clientAuth: true }
          : { name: 'extKeyUsage', serverAuth: true },
      ]);
      c.sign(caKeys.privateKey, forge.md.sha256.create());
      return { cert: forge.pki.certificateToPem(c), key: forge.pki.privateKeyToPem(keys.privateKey) };
    },
  };
}
