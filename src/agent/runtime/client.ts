// A client of the runtime socket for `podvol mounts` and `podvol wait`:
// one HTTP/1.1 request over the unix socket, the JSON answer parsed.
import { request } from 'node:http';
import { fieldOf } from '../../errno.ts';

export interface ClientAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** Thrown when nothing (or not podvol) answers on the socket. */
export class UnreachableError extends Error {}

/** Thrown when podvol does not know the namespace/name (yet). */
export class PodNotKnownError extends Error {}

export function callRuntime(
  socketPath: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
): Promise<ClientAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch {
          reject(
            new UnreachableError(`${socketPath} answered ${res.statusCode} with something that is not JSON`),
          );
        }
      });
      res.on('error', (err) => reject(new UnreachableError(err.message)));
    });
    req.on('timeout', () =>
      req.destroy(new UnreachableError(`no answer from ${socketPath} in ${timeoutMs} ms`)),
    );
    req.on('error', (err) =>
      reject(
        err instanceof UnreachableError
          ? err
          : new UnreachableError(`cannot reach podvol at ${socketPath}: ${err.message}`),
      ),
    );
    req.end();
  });
}

const UUIDISH = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * POD as the CLI takes it: a UID, or namespace/name looked up in the pods
 * podvol knows, waiting up to `waitSeconds` for it to appear. Returns the UID,
 * or throws a message for the user.
 */
export async function resolvePod(
  socketPath: string,
  pod: string,
  timeoutMs: number,
  waitSeconds = 0,
): Promise<string> {
  const slash = pod.indexOf('/');
  if (slash < 0) {
    if (!UUIDISH.test(pod)) throw new Error(`"${pod}" is neither a pod UID nor namespace/name`);
    return pod;
  }
  const namespace = pod.slice(0, slash);
  const name = pod.slice(slash + 1);
  if (!namespace || !name || name.includes('/')) throw new Error(`"${pod}" is not namespace/name`);
  // podvol answers as soon as the pod is known (or after waitSeconds with none).
  const query = new URLSearchParams({ namespace, name, wait: waitSeconds.toFixed(3) });
  const answer = await callRuntime(socketPath, 'GET', `/v1/pods?${query}`, timeoutMs);
  const pods: unknown[] = Array.isArray(answer.body.pods) ? answer.body.pods : [];
  const match = pods.filter((p) => fieldOf(p, 'namespace') === namespace && fieldOf(p, 'name') === name);
  // An edited static pod and its terminating predecessor share a name: the one not terminating wins.
  const found = match.find((p) => !fieldOf(p, 'terminating')) ?? match[0];
  const uid = fieldOf(found, 'uid');
  if (typeof uid !== 'string') throw new PodNotKnownError(`pod ${namespace}/${name} is not known to podvol`);
  return uid;
}
