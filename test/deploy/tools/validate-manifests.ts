// Validates Kubernetes manifests against the API's OpenAPI schemas with
// kubernetes-models (and @kubernetes-models/prometheus-operator for the
// monitoring.coreos.com CRDs). .ci/checks.sh installs those packages into a
// throwaway prefix and runs:
//   node test/deploy/tools/validate-manifests.ts <tools-dir> <file.yaml>...
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { manifestProblems } from '../k8s-fields.ts';

interface ModelClass {
  new (data: unknown): { validate(): void };
}

function modulePath(toolsDir: string, apiVersion: string): string {
  const [group = '', version = ''] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const pkg = group.endsWith('.coreos.com') ? '@kubernetes-models/prometheus-operator' : 'kubernetes-models';
  const sub = group ? `${group}/${version}` : version;
  return join(toolsDir, 'node_modules', pkg, sub, 'index.js');
}

async function validate(toolsDir: string, doc: { apiVersion?: string; kind?: string }): Promise<string[]> {
  if (!doc.apiVersion || !doc.kind) return ['apiVersion and kind are required'];
  let mod: Record<string, ModelClass | undefined>;
  try {
    mod = await import(pathToFileURL(modulePath(toolsDir, doc.apiVersion)).href);
  } catch {
    return [`no schema for apiVersion ${doc.apiVersion}`];
  }
  const Kind = mod[doc.kind];
  if (!Kind) return [`no schema for ${doc.apiVersion} ${doc.kind}`];
  try {
    new Kind(doc).validate();
  } catch (err) {
    const errors = (err as { errors?: { instancePath: string; message?: string }[] }).errors;
    return errors?.map((e) => `${e.instancePath || '.'}: ${e.message}`) ?? [String(err)];
  }
  // Core API kinds also get the strict unknown-field check.
  return doc.apiVersion.includes('coreos.com') ? [] : manifestProblems(doc);
}

const [toolsDir, ...files] = process.argv.slice(2);
if (!toolsDir || files.length === 0) {
  console.error('usage: validate-manifests.ts <tools-dir> <file.yaml>...');
  process.exit(2);
}
let failed = 0;
for (const file of files) {
  for (const [i, d] of parseAllDocuments(readFileSync(file, 'utf8')).entries()) {
    if (d.errors.length > 0) {
      console.error(`${file}: document ${i + 1}: ${d.errors.map((e) => e.message).join('; ')}`);
      failed++;
      continue;
    }
    const doc = d.toJS() as { apiVersion?: string; kind?: string; metadata?: { name?: string } };
    if (doc === null) continue;
    const what = `${file}: ${doc.kind ?? '?'} ${doc.metadata?.name ?? '?'}`;
    const problems = await validate(toolsDir, doc);
    if (problems.length > 0) {
      failed++;
      for (const p of problems) console.error(`${what}: ${p}`);
    } else {
      console.log(`${what}: valid ${doc.apiVersion}`);
    }
  }
}
process.exit(failed > 0 ? 1 : 0);
