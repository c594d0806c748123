// Options shared by several commands (run, plan, drain), so all read the same
// flags, environment variables and defaults.
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { defaultLogFormat, logFormats, logLevels } from '../agent/logger.ts';
import { escapeControl } from '../agent/ops/escape.ts';
import { UnreachableError } from '../agent/runtime/client.ts';
import { errorMessage } from '../errno.ts';
import { EXIT_FAILURE, EXIT_UNREACHABLE, stringOption } from './command.ts';
import { parseDuration } from './duration.ts';

export const nonEmpty = (what: string) => (v: string) => {
  if (v.trim() === '') throw new InvalidArgumentError(`${what} must not be empty`);
  return v;
};

/**
 * A path flag's value, absolute: a relative one is resolved against the
 * working directory podvol starts in, as kubelet takes a relative --root-dir,
 * so every later use (the lock, the socket, a log line) names the same place.
 * '' stays '' (it disables the runtime socket).
 */
export const absolutePath = (v: string) => (v === '' ? v : resolve(v));

export const rootDirOption = () =>
  new Option('--root-dir <dir>', 'root directory (kubelet layout below it)')
    .env('PODVOL_ROOT_DIR')
    .default('/var/lib/podvol')
    .argParser((v: string) => absolutePath(nonEmpty('--root-dir')(v)));

/** podvol's own rule for the node name when none is given: the kernel's host name, lower-cased, as kubelet. */
export const defaultNodeName = () => hostname().trim().toLowerCase();

export const nodeNameOption = () =>
  new Option('--node-name <name>', "this node's name")
    .env('PODVOL_NODE_NAME')
    .default(defaultNodeName())
    .argParser(nonEmpty('--node-name'));

/**
 * Adds --node-name and kubelet's --hostname-override, its other name for the
 * same thing. kubelet trims and lower-cases the override; giving both with
 * different values is a usage error rather than a silent pick.
 */
export function addNodeNameOptions(cmd: Command): Command {
  cmd
    .addOption(nodeNameOption())
    .addOption(
      new Option('--hostname-override <name>', "kubelet's name for --node-name").argParser(
        nonEmpty('--hostname-override'),
      ),
    )
    .hook('preAction', (c) => {
      const override = stringOption(c, 'hostnameOverride');
      if (override === undefined) return;
      const name = override.trim().toLowerCase();
      const source = c.getOptionValueSource('nodeName');
      if (source !== 'default' && c.getOptionValue('nodeName') !== name) {
        c.error(
          `--hostname-override ${name} and --node-name ${c.getOptionValue('nodeName')} disagree; give one`,
          { code: 'podvol.nodeName' },
        );
      }
      c.setOptionValueWithSource('nodeName', name, source === 'default' ? 'cli' : source);
    });
  return cmd;
}
/** Where `podvol run` serves the runtime API and `podvol mounts`/`wait` reach it; '' disables it. */
export const DEFAULT_RUNTIME_SOCKET = '/run/podvol/podvol.sock';
/** How `podvol mounts` and `podvol wait` end on an error: the message, and exit 3 when nothing answered on the socket. */
export function runtimeSocketFailure(command: string, err: unknown): number {
  process.stderr.write(escapeControl(`podvol ${command}: ${errorMessage(err)}\n`));
  return err instanceof UnreachableError ? EXIT_UNREACHABLE : EXIT_FAILURE;
}

/** run serves on the socket (and '' turns it off); mounts and wait only connect to it. */
export const runtimeSocketOption = (description = "the runtime API's unix socket") =>
  new Option('--runtime-socket <path>', description)
    .env('PODVOL_RUNTIME_SOCKET')
    .default(DEFAULT_RUNTIME_SOCKET)
    .argParser(absolutePath);

/** `parse` as a commander argument parser: what it throws becomes commander's usage error. */
export const argumentParser =
  <T>(parse: (v: string) => T) =>
  (v: string): T => {
    try {
      return parse(v);
    } catch (err) {
      throw new InvalidArgumentError(errorMessage(err));
    }
  };

/** Go's time.ParseDuration ("2m", "1m30s", "500ms", "0") in milliseconds, as a commander argument parser. */
export function parseGoDuration(v: string): number {
  const ms = argumentParser(parseDuration)(v);
  // Go accepts "-1s"; no podvol flag means anything by a negative time.
  if (ms < 0) throw new InvalidArgumentError(`invalid duration "${v}": must not be negative`);
  return ms;
}

/** A Go duration (`90s`, `1m0s`, `1h30m`) of at least `min` ms, as kubelet's time flags take it. */
export const durationArg =
  (flag: string, min = 1) =>
  (v: string) => {
    const ms = parseGoDuration(v);
    if (ms < min) throw new InvalidArgumentError(`${flag} must be at least ${min} ms, got "${v}"`);
    return ms;
  };

export const logLevelOption = (defaultLevel = 'info', where = '') =>
  new Option('--log-level <level>', `log level${where}`)
    .env('PODVOL_LOG_LEVEL')
    .choices(logLevels)
    .default(defaultLevel);

export const systemdScopeOption = () =>
  new Option(
    '--systemd-scope <mode>',
    'wrap mount helpers in systemd-run --scope when systemd runs the host (auto) or never (off)',
  )
    .env('PODVOL_SYSTEMD_SCOPE')
    .choices(['auto', 'off'])
    .default('auto');

export const logFormatOption = () =>
  new Option('--log-format <format>', 'json, or one readable line per entry (text)')
    .env('PODVOL_LOG_FORMAT')
    .choices(logFormats)
    .default(defaultLogFormat(), 'text on a terminal, else json');
