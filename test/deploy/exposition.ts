// Compares a Prometheus text exposition (a live scrape of podvol) with the
// catalog in deploy/prometheus/metrics.json: every catalogued family must be
// exposed with its type and labels, and podvol must expose nothing else
// beyond prom-client's default process_* and nodejs_* metrics.
import type { Catalog } from './catalog.ts';

export interface Family {
  type: string;
  labels: Set<string>;
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, name = '', kind = ''] = type;
      families.set(name, { type: kind, labels: families.get(name)?.labels ?? new Set() });
      continue;
    }
    const sample = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!sample) continue;
    const name = sample[1];
    const family = [...families.keys()].find(
      (f) => name === f || ['_bucket', '_sum', '_count', '_total', '_created'].some((s) => name === f + s),
    );
    if (!family) continue;
    const { labels } = families.get(family) ?? { labels: new Set<string>() };
    for (const [, label = ''] of (sample[2] ?? '').matchAll(/([A-Za-z_]\w*)="/g)) {
      if (label !== 'le' && label !== 'quantile') labels.add(label);
    }
  }
  return families;
}

export function expositionProblems(text: string, catalog: Catalog): string[] {
  const families = parseExposition(text);
  const problems: string[] = [];
  for (const m of catalog.metrics) {
    const f = families.get(m.name);
    if (!f) {
      problems.push(`${m.name}: in metrics.json but not exposed`);
      continue;
    }
    if (f.type !== m.type) problems.push(`${m.name}: exposed as ${f.type}, metrics.json says ${m.type}`);
    for (const l of f.labels) {
      if (!m.labels.includes(l)) problems.push(`${m.name}: exposes label ${l} not listed in metrics.json`);
    }
  }
  for (const name of families.keys()) {
    const known = catalog.metrics.some((m) => m.name === name);
    const isDefault = catalog.defaultMetricPrefixes.some((p) => name.startsWith(p));
    if (!known && !isDefault) problems.push(`${name}: exposed but missing from metrics.json`);
  }
  return problems;
}
