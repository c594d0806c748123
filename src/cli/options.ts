// Options shared by several commands (run, plan, drain), so all read the same
// flags, environment variables and defaults.
import { hostname } from 'node:os';
import { InvalidArgumentError, Option } from 'commander';

export const nonEmpty = (what: string) => (v: string) => {
  if (v.trim() === '') throw new InvalidArgumentError(`${what} must not be empty`);
  return v;
};

export const rootDirOption = () =>
  new Option('--root-dir <dir>', 'root directory (kubelet layout below it)')
    .env('PODVOL_ROOT_DIR')
    .default('/var/lib/podvol')
    .argParser(nonEmpty('--root-dir'));

export const nodeNameOption = () =>
  new Option('--node-name <name>', "this node's name")
    .env('PODVOL_NODE_NAME')
    .default(hostname().toLowerCase())
    .argParser(nonEmpty('--node-name'));

const GO_DURATION_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's time.ParseDuration ("2m", "1m30s", "500ms", "0"), in milliseconds; kubelet's duration flags take these. */
export function parseGoDuration(v: string): number {
  if (v === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let ms = 0;
  let end = 0;
  for (let m = re.exec(v); m; m = re.exec(v)) {
    ms += Number(m[1]) * GO_DURATION_UNITS[m[2]];
    end = re.lastIndex;
  }
  if (v === '' || end !== v.length)
    throw new InvalidArgumentError(`invalid duration "${v}": want e.g. 2m, 1m30s, 500ms`);
  return ms;
}
/** Where `podvol run` serves the runtime API and `podvol mounts`/`wait` reach it; '' disables it. */
export const DEFAULT_RUNTIME_SOCKET = '/run/podvol/podvol.sock';
export const runtimeSocketOption = () =>
  new Option('--runtime-socket <path>', "the runtime API's unix socket ('' disables it in run)")
    .env('PODVOL_RUNTIME_SOCKET')
    .default(DEFAULT_RUNTIME_SOCKET);
