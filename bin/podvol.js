#!/usr/bin/env node
// podvol runs its TypeScript sources directly (Node's type stripping), which
// needs Node >= 22.18; say so plainly instead of failing on a syntax error.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `podvol: needs Node.js >= 22.18 (24 LTS recommended), this is ${process.version}; run it through npm (npm start) or node_modules/.bin/node\n`,
  );
  process.exit(1);
}
const { main } = await import('../src/cli.ts');
process.exitCode = await main(process.argv);
