// Prints the manifests of a deploy/ kustomization as one YAML stream, for
// .ci/checks.sh to validate like the plain manifests:
//   node test/deploy/tools/build-variant.ts deploy/cluster-wide > out.yaml
import { stringify } from 'yaml';
import { build } from '../kustomize.ts';

const [dir] = process.argv.slice(2);
if (!dir) {
  console.error('usage: build-variant.ts <kustomization dir>');
  process.exit(2);
}
process.stdout.write(
  build(dir)
    .map((o) => stringify(o))
    .join('---\n'),
);
