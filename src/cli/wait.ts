// `podvol wait POD [--for mounted|unmounted] [--timeout 2m]`: blocks until a
// running podvol has every volume of the pod mounted (or all of them torn
// down). Exit codes: 0 done, 1 timed out or a volume failed permanently (the
// volumes and their reasons are printed), 2 usage error, 3 no podvol answered.
import { setTimeout as sleep } from 'node:timers/promises';
import { type Command, Option } from 'commander';
import { escapeControl } from '../agent/ops/escape.ts';
import { callRuntime, PodNotKnownError, resolvePod } from '../agent/runtime/client.ts';
import { fieldOf } from '../errno.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE, helpNotes, setExitCode, usageError } from './command.ts';
import { parseGoDuration, runtimeSocketFailure, runtimeSocketOption } from './options.ts';

/** Go durations (kubelet's flags), or plain seconds; milliseconds. */
const asDuration = (v: string) => (/^\d+(\.\d+)?$/.test(v) ? Number(v) * 1000 : parseGoDuration(v));

/** The server waits at most this long per request; longer timeouts ask again. */
const MAX_SERVER_WAIT_SECONDS = 300;

interface WaitFlags {
  for: 'mounted' | 'unmounted';
  timeout: number;
  runtimeSocket: string;
}

interface VolumeLine {
  name: string;
  state: string;
  reason?: string;
  message?: string;
}

const optionalString = (v: unknown) => v === undefined || typeof v === 'string';

/** A volume of the daemon's answer (src/agent/runtime/api.ts writes them), checked field by field. */
function isVolumeLine(v: unknown): v is VolumeLine {
  return (
    typeof fieldOf(v, 'name') === 'string' &&
    typeof fieldOf(v, 'state') === 'string' &&
    optionalString(fieldOf(v, 'reason')) &&
    optionalString(fieldOf(v, 'message'))
  );
}

function printReasons(body: Record<string, unknown>): void {
  const volumes = Array.isArray(body.volumes) ? body.volumes.filter(isVolumeLine) : [];
  for (const v of volumes) {
    if (v.state === 'mounted' && body.ready) continue;
    process.stderr.write(
      escapeControl(
        `  volume ${v.name}: ${v.state}${v.reason ? ` ${v.reason}` : ''}${v.message ? `: ${v.message}` : ''}\n`,
      ),
    );
  }
}

async function runWait(pod: string, flags: WaitFlags): Promise<number> {
  if (!flags.runtimeSocket) return usageError('wait: --runtime-socket must not be empty');
  const deadline = Date.now() + flags.timeout;
  const left = () => Math.max(0, deadline - Date.now());
  try {
    let uid: string | undefined;
    // namespace/name may not be known yet (a manifest just written): podvol answers once it is.
    while (uid === undefined) {
      const seconds = Math.min(MAX_SERVER_WAIT_SECONDS, left() / 1000);
      const asked = Date.now();
      try {
        uid = await resolvePod(
          flags.runtimeSocket,
          pod,
          seconds * 1000 + 10_000,
          flags.for === 'mounted' ? seconds : 0,
        );
      } catch (err) {
        if (!(err instanceof PodNotKnownError)) throw err;
        if (flags.for === 'unmounted') return EXIT_OK;
        if (left() === 0) {
          process.stderr.write(escapeControl(`podvol wait: timed out: ${err.message}\n`));
          return EXIT_FAILURE;
        }
        // A podvol that answered before the wait it was asked for (one without ?wait= on /v1/pods): pace the retries.
        if (Date.now() - asked < seconds * 500) await sleep(Math.min(50, left()));
      }
    }
    for (;;) {
      const seconds = Math.min(MAX_SERVER_WAIT_SECONDS, left() / 1000);
      const answer = await callRuntime(
        flags.runtimeSocket,
        'GET',
        `/v1/pods/${encodeURIComponent(uid)}/volumes?wait=${seconds.toFixed(3)}&for=${flags.for}`,
        seconds * 1000 + 10_000,
      );
      if (answer.status === 200) return EXIT_OK;
      if (answer.status !== 504 && answer.status !== 404) {
        // 422 VolumesFailedPermanently: no point waiting out the timeout; say which and why.
        process.stderr.write(escapeControl(`podvol wait: ${answer.body.reason}: ${answer.body.message}\n`));
        if (answer.status === 422) printReasons(answer.body);
        return EXIT_FAILURE;
      }
      if (left() === 0) {
        const what =
          answer.status === 404
            ? String(answer.body.message)
            : `pod ${answer.body.namespace}/${answer.body.name} (${uid}) is not ${flags.for}`;
        process.stderr.write(
          escapeControl(`podvol wait: timed out after ${flags.timeout / 1000}s: ${what}\n`),
        );
        printReasons(answer.body);
        return EXIT_FAILURE;
      }
    }
  } catch (err) {
    return runtimeSocketFailure('wait', err);
  }
}

export function waitCommand(program: Command): void {
  program
    .command('wait')
    .description("wait until a running podvol has a pod's volumes mounted (or torn down)")
    .argument('<pod>', 'pod UID or namespace/name')
    .addOption(
      new Option('--for <state>', 'what to wait for').choices(['mounted', 'unmounted']).default('mounted'),
    )
    .addOption(
      new Option('--timeout <duration>', 'give up after (e.g. 30s, 2m)')
        .default(120_000, '2m')
        .argParser(asDuration),
    )
    .addOption(runtimeSocketOption())
    .addHelpText(
      'after',
      helpNotes(
        `\nExit codes: 0 done, 1 timed out or a volume failed for a reason retrying cannot cure (the volumes and their reasons are printed), 2 usage error, ${EXIT_UNREACHABLE} no podvol answered on the socket.`,
      ),
    )
    .action(async (pod: string, flags: WaitFlags, cmd: Command) => {
      setExitCode(cmd, await runWait(pod, flags));
    });
}
