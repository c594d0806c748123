// Finds the metric names a PromQL expression (or a Grafana variable query)
// reads. Not a full parser: it removes everything that can hold a word that
// is not a metric (strings, label matchers, ranges, grouping clauses,
// Grafana variables), then keeps identifiers that are not function calls or
// keywords. promtool checks the syntax itself in .ci/checks.sh.

const keywords = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
  'start',
  'end',
]);

function stripNested(expr: string, open: string, close: string): string {
  let out = '';
  let depth = 0;
  for (const ch of expr) {
    if (ch === open) depth++;
    else if (ch === close && depth > 0) depth--;
    else if (depth === 0) out += ch;
  }
  return out;
}

export function metricNamesInPromQL(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  s = s.replace(/\$\{?\w+\}?/g, ' ');
  s = stripNested(s, '{', '}');
  s = stripNested(s, '[', ']');
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  const token = /(\d[\w.]*)|([A-Za-z_:][\w:]*)(\s*\()?/g;
  for (const m of s.matchAll(token)) {
    const [, number, ident, call] = m;
    if (number || !ident || call || keywords.has(ident.toLowerCase())) continue;
    names.add(ident);
  }
  return [...names].sort();
}

/** Metric names in a Grafana Prometheus variable query such as `label_values(metric{...}, label)`. */
export function metricNamesInVariableQuery(query: string): string[] {
  const m = /^\s*(label_values|query_result)\s*\(([\s\S]*)\)\s*$/.exec(query);
  if (!m) return metricNamesInPromQL(query);
  const [, fn, body = ''] = m;
  if (fn === 'query_result') return metricNamesInPromQL(body);
  // label_values(selector, label): the last argument is a label name.
  const args = stripNested(stripNested(body, '{', '}'), '(', ')').split(',');
  if (args.length < 2) return [];
  const selector = body.slice(0, body.lastIndexOf(','));
  return metricNamesInPromQL(selector);
}
