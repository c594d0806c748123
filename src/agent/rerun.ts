// A job that runs one at a time and once more if asked while it runs: the
// static pod source's rescan and the plugin watcher's scan. A request that
// arrives mid-run may have seen a change the run already read past, so it
// gets a run of its own after; any number of such requests share that one.

export interface Rerun {
  /** Runs the job now, or after the running one if one is running; resolves when no run is left. */
  run(): Promise<void>;
  /** The runs in flight, for a stop() that waits for them. */
  running(): Promise<void> | undefined;
}

export interface RerunOptions {
  /** Asked before each further run: a stopped owner makes none. */
  stopped?: () => boolean;
  /** Called when the last run ends, e.g. to schedule the next periodic one. */
  idle?: () => void;
}

/** `job` must not throw: it reports its own failures, so that one bug does not end the loop. */
export function rerunWhileAsked(job: () => Promise<void>, opts: RerunOptions = {}): Rerun {
  let running: Promise<void> | undefined;
  let again = false;
  return {
    run() {
      if (running) {
        again = true;
        return running;
      }
      running = (async () => {
        do {
          again = false;
          await job();
        } while (again && !opts.stopped?.());
      })().finally(() => {
        running = undefined;
        opts.idle?.();
      });
      return running;
    },
    running: () => running,
  };
}
