#!/usr/bin/env node
// podvol runs the bundle of its sources (dist/bundle, npm run build; npm ci
// builds it) while it is fresh, else its TypeScript sources directly (Node's
// type stripping), which needs Node >= 22.18. Under an older Node (a Debian machine's 18 or 20, as
// when `npm link` or PATH reach this file through #!/usr/bin/env node), it
// runs itself again with the Node 24 that `npm ci` installs in node_modules
// (the `node` devDependency); without that, it says so plainly instead of
// failing on a syntax error.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freshBundle } from './fresh-bundle.js';

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  const bundled = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  if (!existsSync(bundled)) {
    process.stderr.write(
      `podvol: needs Node.js >= 22.18 (24 LTS recommended), this is ${process.version}; run npm ci first (it installs Node 24 in node_modules), or use the single executable (npm run build:binary)\n`,
    );
    process.exit(1);
  }
  const child = spawn(bundled, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  // The child is podvol: signals sent to this process (systemd, kill) are its signals.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code ?? 1);
    }
  });
} else {
  const { main } = freshBundle()
    ? await import(new URL('../dist/bundle/cli.mjs', import.meta.url).href)
    : await import('../src/cli.ts');
  process.exitCode = await main(process.argv);
}
