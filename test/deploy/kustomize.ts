// Just enough of kustomize to build podvol's deploy/ variants the way
// `kubectl apply -k` does: resources (files, or directories holding a
// kustomization.yaml) and RFC 6902 JSON patches with a target. Anything else
// in a kustomization is an error, so a variant cannot silently grow a feature
// this builder would ignore.
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { applyPatch } from '../apiserver/patch.ts';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  patches?: { path: string; target: Record<string, string> }[];
}

const KNOWN = new Set(['apiVersion', 'kind', 'resources', 'patches']);

function loadFile(path: string): K8sObject[] {
  return parseAllDocuments(readFileSync(path, 'utf8'))
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${path}: ${d.errors.map((e) => e.message).join('; ')}`);
      return d.toJS() as K8sObject;
    })
    .filter((o) => o !== null);
}

function matches(o: K8sObject, target: Record<string, string>): boolean {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const want: Record<string, string | undefined> = {
    group,
    version,
    kind: o.kind,
    name: o.metadata.name,
    namespace: o.metadata.namespace,
  };
  return Object.entries(target).every(([k, v]) => {
    if (!(k in want)) throw new Error(`patch target field ${k} is not supported`);
    return want[k] === v;
  });
}

/** The objects `kubectl kustomize <dir>` would print, in order. */
export function build(dir: string): K8sObject[] {
  const k = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as Kustomization;
  for (const key of Object.keys(k))
    if (!KNOWN.has(key)) throw new Error(`${dir}/kustomization.yaml: ${key} is not supported here`);
  if (k.kind !== 'Kustomization') throw new Error(`${dir}/kustomization.yaml: kind must be Kustomization`);
  let objects: K8sObject[] = [];
  for (const r of k.resources ?? []) {
    const path = join(dir, r);
    objects.push(...(statSync(path).isDirectory() ? build(path) : loadFile(path)));
  }
  for (const p of k.patches ?? []) {
    const ops = parse(readFileSync(join(dir, p.path), 'utf8')) as unknown[];
    const hits = objects.filter((o) => matches(o, p.target));
    if (hits.length !== 1) throw new Error(`patch ${p.path} matches ${hits.length} objects, want 1`);
    objects = objects.map((o) =>
      o === hits[0] ? (applyPatch('application/json-patch+json', o, ops) as K8sObject) : o,
    );
  }
  return objects;
}

export const deployDir = join(dirname(new URL(import.meta.url).pathname), '..', '..', 'deploy');
