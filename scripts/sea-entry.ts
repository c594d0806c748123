// The single executable's entry point (scripts/build-binary.ts bundles it):
// the CLI, with no Node version check, because the executable carries its own Node 24.
import { main } from '../src/cli.ts';

main(process.argv).then((code) => {
  process.exitCode = code;
});
