// One HTTPS request with the client's trust, certificate and bearer token, for
// tests of podvol's secured HTTP port (fetch cannot be given a CA).
import { request } from 'node:https';

export interface HttpsCall {
  /** PEM the client trusts. */
  ca: string;
  method?: string;
  token?: string;
  cert?: string;
  key?: string;
}

export function httpsRequest(url: string, c: HttpsCall): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: c.method ?? 'GET',
        ca: c.ca,
        cert: c.cert,
        key: c.key,
        headers: c.token !== undefined ? { authorization: `Bearer ${c.token}` } : {},
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
