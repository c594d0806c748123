// The operator subcommands `podvol status` and `podvol plan`. Exit codes:
// 0 success, 1 the manifest cannot be read or has unusable documents, 2 a
// usage error (commander), 3 no podvol answered (status).
import { readFile } from 'node:fs/promises';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { nodeNameOption, nonEmpty, rootDirOption } from '../cli-options.ts';
import { planManifest } from './plan.ts';
import { formatPlan } from './plan-format.ts';
import { createPlanContext } from './plan-host.ts';
import {
  DEFAULT_SERVER,
  EXIT_UNREACHABLE,
  normalizeServer,
  runStatus,
  type StatusFormat,
  statusFormats,
} from './status.ts';

const asServer = (v: string) => {
  try {
    return normalizeServer(v);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};

interface PlanFlags {
  filename: string;
  rootDir: string;
  nodeName: string;
  output: 'text' | 'json';
}

async function readManifest(file: string): Promise<string> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  return readFile(file, 'utf8');
}

async function runPlan(flags: PlanFlags): Promise<number> {
  let text: string;
  try {
    text = await readManifest(flags.filename);
  } catch (err) {
    process.stderr.write(`podvol plan: cannot read ${flags.filename}: ${(err as Error).message}\n`);
    return 1;
  }
  const ctx = createPlanContext({ rootDir: flags.rootDir, nodeName: flags.nodeName });
  const plan = planManifest(text, flags.filename, ctx);
  for (const e of plan.errors) {
    const where = `${flags.filename}${e.document !== undefined ? ` document ${e.document}` : ''}`;
    process.stderr.write(`podvol plan: ${where}: ${e.reason}: ${e.message}\n`);
  }
  process.stdout.write(
    flags.output === 'json' ? `${JSON.stringify(plan.steps, null, 2)}\n` : formatPlan(plan),
  );
  return plan.errors.length > 0 ? 1 : 0;
}

/** Adds `status` and `plan` to the podvol program. */
export function registerOperatorCommands(program: Command): void {
  const setExit = (cmd: Command, code: number) => cmd.parent?.setOptionValue('exitCode', code);

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
      `\nAGE is <unknown>: /status carries no timestamps.\nExit codes: 0 ok, 2 usage error, ${EXIT_UNREACHABLE} no podvol answered at the server (or it answered with an error).`,
    )
    .action(async (flags: { server: string; output: StatusFormat }, cmd: Command) => {
      // The default is not run through the parser; normalise it here too.
      setExit(cmd, await runStatus({ server: normalizeServer(flags.server), output: flags.output }));
    });

  program
    .command('plan')
    .description(
      'dry run: print every directory, mount, file and unmount podvol would make for the pods of a manifest',
    )
    .addOption(
      new Option('-f, --filename <file>', 'pod manifest (YAML or JSON, several documents); - for stdin')
        .makeOptionMandatory()
        .argParser(nonEmpty('--filename')),
    )
    .addOption(rootDirOption())
    .addOption(nodeNameOption())
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText(
      'after',
      '\nChanges nothing on this host: no directory, file or mount (it only stats hostPath targets).\nExit codes: 0 ok, 1 the manifest cannot be read or has documents that are not usable pods, 2 usage error.',
    )
    .action(async (flags: PlanFlags, cmd: Command) => {
      setExit(cmd, await runPlan(flags));
    });
}
