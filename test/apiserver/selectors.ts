// Field and label selectors as the API server parses them. Parse errors carry
// the real server's wording so clients see the same 400 BadRequest.

export type Matcher = (obj: KubeObj) => boolean;

export interface KubeObj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    generateName?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export class SelectorError extends Error {}

function fieldValue(obj: KubeObj, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return '';
  return String(cur);
}

/** `a=b,c!=d`; only the labels in `allowed` are supported (like the real server). */
export function parseFieldSelector(selector: string, allowed: readonly string[]): Matcher {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  const tests: Matcher[] = [];
  for (const term of terms) {
    const m = /^([^=!]+?)\s*(==|!=|=)\s*(.*)$/.exec(term);
    if (!m) throw new SelectorError(`invalid selector: '${selector}'; can't understand '${term}'`);
    // Every group of these patterns takes part in a match: the defaults only satisfy the type.
    const [, field = '', op, value] = m;
    if (!allowed.includes(field)) {
      throw new SelectorError(`field label not supported: ${field}`);
    }
    tests.push(op === '!=' ? (o) => fieldValue(o, field) !== value : (o) => fieldValue(o, field) === value);
  }
  return (o) => tests.every((t) => t(o));
}

/** Equality (`a=b`, `a==b`, `a!=b`), existence (`a`, `!a`) and set (`a in (x,y)`, `a notin (x)`) requirements. */
export function parseLabelSelector(selector: string): Matcher {
  // Split on commas outside parentheses.
  const terms: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(cur);
      cur = '';
    } else cur += ch;
  }
  terms.push(cur);
  const tests: Matcher[] = [];
  for (const raw of terms) {
    const term = raw.trim();
    if (term === '') continue;
    const labels = (o: KubeObj) => o.metadata.labels ?? {};
    let m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (m) {
      const [, key = '', op, list = ''] = m;
      const values = list.split(',').map((v) => v.trim());
      tests.push(
        op === 'in'
          ? (o) => key in labels(o) && values.includes(labels(o)[key] ?? '')
          : (o) => !(key in labels(o)) || !values.includes(labels(o)[key] ?? ''),
      );
      continue;
    }
    m = /^([\w./-]+)\s*(==|!=|=)\s*([\w.-]*)$/.exec(term);
    if (m) {
      const [, key = '', op, value] = m;
      tests.push(
        op === '!=' ? (o) => labels(o)[key] !== value : (o) => key in labels(o) && labels(o)[key] === value,
      );
      continue;
    }
    m = /^(!?)([\w./-]+)$/.exec(term);
    if (m) {
      const [, neg, key = ''] = m;
      tests.push(neg ? (o) => !(key in labels(o)) : (o) => key in labels(o));
      continue;
    }
    throw new SelectorError(`unable to parse requirement: ${term}`);
  }
  return (o) => tests.every((t) => t(o));
}
