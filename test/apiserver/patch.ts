// PATCH bodies: RFC 6902 JSON patch and RFC 7386 merge patch. Strategic merge
// patch is applied as a merge patch: the difference (list merge keys) does not
// matter for the objects this server's clients patch (Events, Node status).

import { at } from '../helpers/must.ts';
import { StatusError } from './status.ts';

type Json = unknown;

export function mergePatch(target: Json, patch: Json): Json {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return structuredClone(patch);
  const out: Record<string, Json> =
    target !== null && typeof target === 'object' && !Array.isArray(target)
      ? { ...(target as Record<string, Json>) }
      : {};
  for (const [k, v] of Object.entries(patch as Record<string, Json>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function unescapePointer(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function parentOf(doc: Json, path: string): { parent: Record<string, Json> | Json[]; key: string } {
  const tokens = path.split('/').slice(1).map(unescapePointer);
  const key = tokens.pop();
  if (key === undefined) throw new StatusError(422, `invalid JSON patch path ${JSON.stringify(path)}`);
  let cur = doc;
  for (const t of tokens) {
    if (cur === null || typeof cur !== 'object')
      throw new StatusError(422, `JSON patch path ${path} does not exist`);
    cur = (cur as Record<string, Json>)[t];
  }
  if (cur === null || typeof cur !== 'object')
    throw new StatusError(422, `JSON patch path ${path} does not exist`);
  return { parent: cur as Record<string, Json>, key };
}

interface Op {
  op: string;
  path: string;
  value?: Json;
  from?: string;
}

export function jsonPatch(doc: Json, ops: Op[]): Json {
  const out = structuredClone(doc);
  for (const op of ops) {
    const { parent, key } = parentOf(out, op.path);
    const isArr = Array.isArray(parent);
    const idx = key === '-' && isArr ? parent.length : Number(key);
    switch (op.op) {
      case 'add':
        if (isArr) parent.splice(idx, 0, structuredClone(op.value));
        else parent[key] = structuredClone(op.value);
        break;
      case 'replace':
        if (isArr) parent[idx] = structuredClone(op.value);
        else parent[key] = structuredClone(op.value);
        break;
      case 'remove':
        if (isArr) parent.splice(idx, 1);
        else delete parent[key];
        break;
      case 'test': {
        const cur = isArr ? parent[idx] : parent[key];
        if (JSON.stringify(cur) !== JSON.stringify(op.value)) {
          throw new StatusError(
            422,
            `the server rejected our request due to an error in our request: testing value ${op.path} failed`,
          );
        }
        break;
      }
      default:
        throw new StatusError(422, `unsupported JSON patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return out;
}

export function applyPatch(contentType: string, doc: Json, body: Json): Json {
  const type = at(contentType.split(';'), 0).trim();
  switch (type) {
    case 'application/json-patch+json':
      if (!Array.isArray(body)) throw new StatusError(400, 'json patch body must be an array of operations');
      return jsonPatch(doc, body as Op[]);
    case 'application/merge-patch+json':
    case 'application/strategic-merge-patch+json':
      return mergePatch(doc, body);
    default:
      throw new StatusError(
        415,
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json`,
      );
  }
}
