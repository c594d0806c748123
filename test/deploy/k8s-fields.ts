// Strict field check for Kubernetes manifests: every key must be a field of
// the API type at that position, as @kubernetes/client-node's generated
// models describe it. Schema validators accept unknown fields (the OpenAPI
// schemas allow them), yet a misspelt `mountPropagation` would silently
// deploy without propagation.
import * as k8s from '@kubernetes/client-node';
import { at } from '../helpers/must.ts';

interface Attribute {
  baseName: string;
  type: string;
}

interface Model {
  getAttributeTypeMap(): Attribute[];
}

const models = k8s as unknown as Record<string, Model | undefined>;

function model(typeName: string): Model | undefined {
  const m = models[typeName];
  return typeof m?.getAttributeTypeMap === 'function' ? m : undefined;
}

/** The client-node model name for an object's apiVersion and kind, e.g. apps/v1 DaemonSet -> V1DaemonSet. */
export function modelName(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop() ?? apiVersion;
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

function describe(value: unknown): string {
  return Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
}

/** Paths of fields that the type does not have, and of values of the wrong shape. */
export function fieldProblems(value: unknown, typeName: string, path = ''): string[] {
  const array = /^Array<(.+)>$/.exec(typeName);
  if (array) {
    if (!Array.isArray(value)) return [`${path || '.'}: expected a list, got ${describe(value)}`];
    return value.flatMap((v, i) => fieldProblems(v, at(array, 1), `${path}[${i}]`));
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(typeName);
  if (map) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return [`${path || '.'}: expected a map, got ${describe(value)}`];
    }
    return Object.entries(value).flatMap(([k, v]) => fieldProblems(v, at(map, 1), `${path}.${k}`));
  }
  const m = model(typeName);
  if (!m) return [];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [`${path || '.'}: expected an object (${typeName}), got ${describe(value)}`];
  }
  const attrs = new Map(m.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value).flatMap(([k, v]) => {
    const t = attrs.get(k);
    if (t === undefined) return [`${path}.${k}: unknown field of ${typeName}`];
    return fieldProblems(v, t, `${path}.${k}`);
  });
}

/** Problems of a whole manifest; an unknown kind is a problem too. */
export function manifestProblems(doc: { apiVersion?: string; kind?: string }): string[] {
  if (!doc.apiVersion || !doc.kind) return ['.: apiVersion and kind are required'];
  const name = modelName(doc.apiVersion, doc.kind);
  if (!model(name)) return [`.: no Kubernetes model ${name} for ${doc.apiVersion} ${doc.kind}`];
  return fieldProblems(doc, name);
}
