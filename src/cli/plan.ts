// `podvol plan`: a dry run of SetUp and TearDown for the pods of a manifest
// file, a directory of them (as --pod-manifest-path) or stdin. Exit codes: 0
// ok, 1 the manifest cannot be read, holds no pod, has unusable documents, or a
// volume would fail; 2 usage error.
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { text } from 'node:stream/consumers';
import type { V1Pod } from '@kubernetes/client-node';
import { type Command, Option } from 'commander';
import { escapeControl, escapeControlJSON } from '../agent/ops/escape.ts';
import type { Plan } from '../agent/ops/plan.ts';
import type { SourceError } from '../agent/pods/types.ts';
import { errorMessage } from '../errno.ts';
import { silentLogger } from '../logger.ts';
import { EXIT_FAILURE, EXIT_OK, helpNotes, setExitCode } from './command.ts';
import { nodeNameOption, nonEmpty, rootDirOption } from './options.ts';

interface PlanFlags {
  filename: string;
  rootDir: string;
  nodeName: string;
  output: 'text' | 'json';
}

async function readStdin(): Promise<string> {
  return text(process.stdin);
}

/**
 * A file or a directory is read by the static pod source itself (one scan), so
 * plan sees exactly the pods, names and errors `podvol run --pod-manifest-path`
 * would: same ignored names, same duplicate checks, same size limit.
 */
async function readPods(file: string, nodeName: string): Promise<{ pods: V1Pod[]; errors: SourceError[] }> {
  const { createStaticPodSource } = await import('../agent/pods/static-source.ts');
  await stat(file); // a missing path is an error here, not an empty directory to wait for
  // The UID of a static pod hashes its file's path: the same absolute path `run` would see.
  const source = createStaticPodSource({ dir: resolve(file), nodeName, logger: silentLogger() });
  await source.start();
  await source.stop();
  return { pods: source.pods(), errors: source.errors() };
}

function writeSourceError(e: SourceError, filename: string): void {
  const where = `${e.file ?? filename}${e.document !== undefined ? ` document ${e.document}` : ''}`;
  const further = e.furtherErrors ? ` (and ${e.furtherErrors} more errors in this file)` : '';
  process.stderr.write(escapeControl(`podvol plan: ${where}: ${e.reason}: ${e.message}${further}\n`));
}

async function runPlan(flags: PlanFlags): Promise<number> {
  // Loaded here, not at the top: the other commands need none of it.
  const { failingVolumes, planSource } = await import('../agent/ops/plan.ts');
  const { formatPlan } = await import('../agent/ops/plan-format.ts');
  const { parseManifestFile } = await import('../agent/pods/manifest.ts');
  let source: { pods: V1Pod[]; errors: SourceError[] };
  try {
    source =
      flags.filename === '-'
        ? parseManifestFile(await readStdin(), flags.filename, flags.nodeName)
        : await readPods(flags.filename, flags.nodeName);
  } catch (err) {
    process.stderr.write(escapeControl(`podvol plan: cannot read ${flags.filename}: ${errorMessage(err)}\n`));
    return EXIT_FAILURE;
  }
  if (source.pods.length === 0) {
    // Nothing to plan is not a plan that passed: a wrong path or an empty pipe must not look like one.
    for (const e of source.errors) writeSourceError(e, flags.filename);
    const input = flags.filename === '-' ? 'stdin' : flags.filename;
    process.stderr.write(escapeControl(`podvol plan: no pod to plan in ${input}\n`));
    return EXIT_FAILURE;
  }
  const plan: Plan = await planSource(source.pods, source.errors, {
    rootDir: flags.rootDir,
    nodeName: flags.nodeName,
  });
  for (const e of plan.errors) writeSourceError(e, flags.filename);
  process.stdout.write(
    flags.output === 'json'
      ? escapeControlJSON(`${JSON.stringify(plan.steps, null, 2)}\n`)
      : escapeControl(formatPlan(plan)),
  );
  const failing = failingVolumes(plan);
  for (const s of failing)
    process.stderr.write(escapeControl(`podvol plan: ${s.pod} volume ${s.volume} would fail: ${s.detail}\n`));
  return plan.errors.length > 0 || failing.length > 0 ? EXIT_FAILURE : EXIT_OK;
}

export function planCommand(program: Command): void {
  program
    .command('plan')
    .description(
      'dry run: print every directory, mount, file and unmount podvol would make for the pods of a manifest',
    )
    .addOption(
      new Option(
        '-f, --filename <file>',
        'pod manifest (YAML or JSON, several documents), a directory of them, or - for stdin',
      )
        .makeOptionMandatory()
        .argParser(nonEmpty('--filename')),
    )
    .addOption(rootDirOption())
    .addOption(nodeNameOption())
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText(
      'after',
      helpNotes(
        '\nChanges nothing on this host: no directory, file or mount. The volume plugins run against a recording copy of it (read from the host, never written).\nExit codes: 0 ok, 1 the manifest cannot be read, holds no pod, has documents that are not usable pods, or a volume would fail; 2 usage error.',
      ),
    )
    .action(async (flags: PlanFlags, cmd: Command) => {
      setExitCode(cmd, await runPlan(flags));
    });
}
