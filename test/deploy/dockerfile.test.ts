import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { at } from '../helpers/must.ts';
import { instructions, parseDockerfile } from './dockerfile.ts';

const text = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
const dockerfile = parseDockerfile(text);
const dockerignore = readFileSync(new URL('../../.dockerignore', import.meta.url), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const runtime = at(dockerfile.stages, -1, 'runtime stage');
const build = at(dockerfile.stages, 0, 'build stage');
const runs = (stage: typeof build) => instructions(stage, 'RUN').map((i) => i.args);

describe('Dockerfile', () => {
  test('is multi-stage on a Node 24 slim Debian base', () => {
    assert.ok(dockerfile.stages.length >= 2, 'expected a build stage and a runtime stage');
    for (const s of dockerfile.stages) {
      assert.match(s.from, /^node:24-(bookworm|trixie)-slim$/, `stage ${s.name ?? '?'} is FROM ${s.from}`);
    }
  });

  test('the build stage installs dev dependencies, type-checks and prunes to production ones', () => {
    const cmds = runs(build).join(' && ');
    assert.match(cmds, /\bnpm ci\b/);
    assert.doesNotMatch(
      cmds,
      /npm ci[^&]*--omit=dev/,
      'the build stage needs dev dependencies to type-check',
    );
    assert.match(cmds, /\btsc --noEmit\b/);
    assert.match(cmds, /npm prune --omit=dev/);
    assert.ok(cmds.indexOf('tsc') < cmds.indexOf('npm prune'), 'type-check before pruning the compiler away');
  });

  test('the runtime stage gets production modules, sources and bin from the build stage only', () => {
    const copies = instructions(runtime, 'COPY');
    for (const c of copies)
      assert.equal(c.flags.from, build.name, `COPY ${c.args} must come from the build stage`);
    const sources = copies.map((c) => c.args.split(/\s+/)[0]);
    for (const needed of ['/app/node_modules/', '/app/src/', '/app/bin/'])
      assert.ok(sources.includes(needed), needed);
    assert.doesNotMatch(
      runs(runtime).join(' '),
      /\bnpm (ci|install|i)\b/,
      'no dependency install in the runtime stage',
    );
  });

  test('installs util-linux mount and tini from Debian, and no busybox', () => {
    const apt = runs(runtime).find((r) => r.includes('apt-get install'));
    assert.ok(apt, 'runtime stage installs packages with apt-get');
    assert.match(apt, /--no-install-recommends/);
    const packages = apt.split(/\s+/);
    assert.ok(packages.includes('mount'), 'the util-linux mount package');
    assert.ok(packages.includes('tini'));
    assert.match(apt, /rm -rf \/var\/lib\/apt\/lists/);
    for (const s of dockerfile.stages) {
      assert.doesNotMatch(s.from, /busybox|alpine/i);
      for (const r of runs(s)) assert.doesNotMatch(r, /busybox/i);
    }
  });

  test('the runtime image drops the package managers and every setuid/setgid bit', () => {
    const cmds = runs(runtime).join('\n');
    for (const path of ['/usr/local/lib/node_modules/npm', '/usr/local/bin/npx', '/usr/local/bin/corepack'])
      assert.ok(cmds.includes(path), `removes ${path}`);
    assert.match(cmds, /find \/ -xdev -type f -perm \/6000 -exec chmod a-s/);
  });

  test('tini is PID 1 and runs `podvol run` in exec form, without a shell or npm', () => {
    const entrypoints = instructions(runtime, 'ENTRYPOINT');
    assert.equal(entrypoints.length, 1);
    assert.deepEqual(JSON.parse(at(entrypoints, 0).args), [
      '/usr/bin/tini',
      '--',
      'node',
      'bin/podvol.js',
      'run',
    ]);
    const workdir = instructions(runtime, 'WORKDIR').at(-1);
    assert.equal(workdir?.args, '/app', 'bin/podvol.js resolves against /app');
    for (const cmd of instructions(runtime, 'CMD')) assert.match(cmd.args, /^\[/, 'CMD in exec form');
  });

  test("the CLI is on the image's PATH as podvol", () => {
    assert.ok(
      runs(runtime).some((r) => r.includes('ln -s /app/bin/podvol.js /usr/local/bin/podvol')),
      "/usr/local/bin/podvol -> /app/bin/podvol.js (executable, #!/usr/bin/env node: the image's Node 24)",
    );
  });

  test('.dockerignore lets in exactly what the build stage copies from the context', () => {
    assert.equal(dockerignore[0], '**', 'start from an empty context');
    const allowed = dockerignore
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/\*\*$/, '/'));
    const copied = instructions(build, 'COPY').flatMap((c) => c.args.split(/\s+/).slice(0, -1));
    for (const src of copied)
      assert.ok(allowed.includes(src), `${src} is copied but excluded by .dockerignore`);
    assert.ok(!allowed.some((a) => a.startsWith('node_modules')), 'node_modules never enters the context');
  });
});
