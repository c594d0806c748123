// `podvol mounts POD -c CONTAINER`: a container's mounts from a running
// podvol's runtime socket, as OCI runtime-spec mount objects (-o json, the
// endpoint's document: its "mounts" go into config.json unchanged) or a table.
// Exit codes: 0 ok, 1 podvol refused (unknown pod or container, volumes not
// ready, a mount kubelet would refuse), 2 usage error, 3 no podvol answered.
import { type Command, Option } from 'commander';
import { escapeControl, escapeControlJSON } from '../agent/ops/escape.ts';
import { callRuntime, resolvePod } from '../agent/runtime/client.ts';
import { fieldOf } from '../errno.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE, helpNotes, setExitCode, usageError } from './command.ts';
import { runtimeSocketFailure, runtimeSocketOption } from './options.ts';

const REQUEST_TIMEOUT_MS = 30_000;

interface MountsFlags {
  container?: string;
  output: 'json' | 'table';
  runtimeSocket: string;
}

interface Mount {
  destination: string;
  source: string;
  options: string[];
}

interface ImageVolume {
  destination: string;
  reference: string;
  pullPolicy?: string;
  subPath?: string;
  propagation?: string;
}

const isString = (v: unknown) => typeof v === 'string';
const isOptionalString = (v: unknown) => v === undefined || typeof v === 'string';

// The daemon's answer (src/agent/runtime/api.ts writes it), checked field by field.
const isMount = (v: unknown): v is Mount => {
  const options = fieldOf(v, 'options');
  return (
    isString(fieldOf(v, 'destination')) &&
    isString(fieldOf(v, 'source')) &&
    Array.isArray(options) &&
    options.every(isString)
  );
};
const isImageVolume = (v: unknown): v is ImageVolume =>
  isString(fieldOf(v, 'destination')) &&
  isString(fieldOf(v, 'reference')) &&
  ['pullPolicy', 'subPath', 'propagation'].every((k) => isOptionalString(fieldOf(v, k)));
const checked = <T>(list: unknown, ok: (v: unknown) => v is T): T[] =>
  Array.isArray(list) ? list.filter(ok) : [];

/**
 * DESTINATION, SOURCE, OPTIONS: the bind mounts, then the image volumes (the
 * runtime mounts those itself), whose SOURCE is `image:<reference>`.
 */
export function formatMountsTable(mounts: Mount[], imageVolumes: ImageVolume[] = []): string {
  const rows = [
    ['DESTINATION', 'SOURCE', 'OPTIONS'],
    ...mounts.map((m) => [m.destination, m.source, m.options.join(',')]),
    ...imageVolumes.map((v) => [
      v.destination,
      `image:${v.reference}`,
      [
        'ro',
        ...(v.propagation ? [v.propagation] : []),
        ...(v.pullPolicy ? [`pullPolicy=${v.pullPolicy}`] : []),
        ...(v.subPath !== undefined ? [`subPath=${v.subPath}`] : []),
      ].join(','),
    ]),
  ];
  // Destinations, subPaths and references come from the pod: escape terminal controls.
  const cells = rows.map((r) => r.map(escapeControl));
  const widths = (cells[0] ?? []).map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  return (
    cells
      .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('   '))
      .join('\n') + '\n'
  );
}

async function runMounts(pod: string, flags: MountsFlags): Promise<number> {
  if (!flags.container) return usageError('mounts: -c, --container NAME is required');
  if (!flags.runtimeSocket) return usageError('mounts: --runtime-socket must not be empty');
  try {
    const uid = await resolvePod(flags.runtimeSocket, pod, REQUEST_TIMEOUT_MS);
    const answer = await callRuntime(
      flags.runtimeSocket,
      'GET',
      `/v1/pods/${encodeURIComponent(uid)}/containers/${encodeURIComponent(flags.container)}/mounts`,
      REQUEST_TIMEOUT_MS,
    );
    if (answer.status !== 200) {
      process.stderr.write(escapeControl(`podvol mounts: ${answer.body.reason}: ${answer.body.message}\n`));
      return EXIT_FAILURE;
    }
    process.stdout.write(
      flags.output === 'json'
        ? `${escapeControlJSON(JSON.stringify(answer.body, null, 2))}\n`
        : formatMountsTable(
            checked(answer.body.mounts, isMount),
            checked(answer.body.imageVolumes, isImageVolume),
          ),
    );
    return EXIT_OK;
  } catch (err) {
    return runtimeSocketFailure('mounts', err);
  }
}

export function mountsCommand(program: Command): void {
  program
    .command('mounts')
    .description("print a container's mounts (OCI runtime-spec objects) from a running podvol")
    .argument('<pod>', 'pod UID or namespace/name')
    .addOption(new Option('-c, --container <name>', 'container, init container or ephemeral container'))
    .addOption(
      new Option('-o, --output <format>', 'output format').choices(['json', 'table']).default('table'),
    )
    .addOption(runtimeSocketOption())
    .addHelpText(
      'after',
      helpNotes(
        `\nExit codes: 0 ok, 1 podvol refused (the reason is printed), 2 usage error, ${EXIT_UNREACHABLE} no podvol answered on the socket.`,
      ),
    )
    .action(async (pod: string, flags: MountsFlags, cmd: Command) => {
      setExitCode(cmd, await runMounts(pod, flags));
    });
}
