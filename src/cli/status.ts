// `podvol status`: the volumes of a running podvol (its /status) as a table.
// Exit codes: 0 answered, 2 usage error, 3 no podvol answered.
import { type Command, Option } from 'commander';
import { escapeControl, escapeControlJSON } from '../agent/ops/escape.ts';
import {
  DEFAULT_SERVER,
  fetchStatus,
  formatStatus,
  normalizeServer,
  type StatusFormat,
  statusFormats,
} from '../agent/ops/status.ts';
import { EXIT_UNREACHABLE, helpNotes, setExitCode } from './command.ts';
import { argumentParser } from './options.ts';

const asServer = argumentParser(normalizeServer);

export function statusCommand(program: Command): void {
  program
    .command('status')
    .description('show the volumes of a running podvol (its /status), as a table')
    .addOption(
      new Option('--server <url>', 'where podvol listens')
        .env('PODVOL_SERVER')
        .default(DEFAULT_SERVER)
        .argParser(asServer),
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(statusFormats).default('table'))
    .addHelpText(
      'after',
      helpNotes(
        `\nAGE counts from when the volume was first desired for the pod (kept in the volume's record across restarts); it is <unknown> for a volume no longer desired (unmounting, or dropped from the pod's spec) and for a pod without volumes.\nExit codes: 0 ok, 2 usage error, ${EXIT_UNREACHABLE} no podvol answered at the server (or it answered with an error).`,
      ),
    )
    .action(async (flags: { server: string; output: StatusFormat }, cmd: Command) => {
      // The default is not run through the parser; normalise it here too.
      setExitCode(cmd, await runStatus({ server: normalizeServer(flags.server), output: flags.output }));
    });
}

interface StatusOptions {
  server: string;
  output: StatusFormat;
}

interface Output {
  write(text: string): unknown;
}

/** Runs `podvol status`; returns the exit code (0, or EXIT_UNREACHABLE). */
async function runStatus(
  o: StatusOptions,
  io: { stdout: Output; stderr: Output } = process,
): Promise<number> {
  const r = await fetchStatus(o.server);
  if (!r.ok) {
    io.stderr.write(escapeControl(`podvol status: ${r.message}\n`));
    return EXIT_UNREACHABLE;
  }
  if (o.output === 'json') {
    io.stdout.write(escapeControlJSON(r.body.endsWith('\n') ? r.body : `${r.body}\n`));
    return 0;
  }
  if (r.doc.pods.length === 0) {
    // As kubectl: the "nothing here" note goes to stderr, so stdout stays parseable.
    io.stderr.write(escapeControl(`No pods on node ${r.doc.node || '(unknown)'}.\n`));
  }
  io.stdout.write(escapeControl(formatStatus(r.doc, o.output)));
  return 0;
}
