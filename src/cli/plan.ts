// `podvol plan`: a dry run of SetUp and TearDown for the pods of a manifest.
// Exit codes: 0 ok, 1 the manifest cannot be read or has unusable documents,
// 2 usage error.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { setExitCode } from './command.ts';
import { nodeNameOption, nonEmpty, rootDirOption } from './options.ts';

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
  // Loaded on use, so that other commands start without the plugins' modules.
  const [{ planManifest }, { formatPlan }, { createPlanContext }] = await Promise.all([
    import('../agent/ops/plan.ts'),
    import('../agent/ops/plan-format.ts'),
    import('../agent/ops/plan-host.ts'),
  ]);
  const ctx = createPlanContext({ rootDir: flags.rootDir, nodeName: flags.nodeName });
  // The UID of a static pod hashes its file's path: the same absolute path `run` would see.
  const plan = planManifest(text, flags.filename === '-' ? '-' : resolve(flags.filename), ctx);
  for (const e of plan.errors) {
    const where = `${flags.filename}${e.document !== undefined ? ` document ${e.document}` : ''}`;
    process.stderr.write(`podvol plan: ${where}: ${e.reason}: ${e.message}\n`);
  }
  process.stdout.write(
    flags.output === 'json' ? `${JSON.stringify(plan.steps, null, 2)}\n` : formatPlan(plan),
  );
  return plan.errors.length > 0 ? 1 : 0;
}

export function planCommand(program: Command): void {
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
      setExitCode(cmd, await runPlan(flags));
    });
}
