// The one list of metrics podvol exports (deploy/prometheus/metrics.json) and
// the rules for which series names a query may use.
import { readFileSync } from 'node:fs';

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary';

export interface MetricSpec {
  name: string;
  type: MetricType;
  labels: string[];
  help: string;
}

export interface Catalog {
  defaultMetricPrefixes: string[];
  prometheusSynthetic: string[];
  metrics: MetricSpec[];
}

export const catalogPath = new URL('../../deploy/prometheus/metrics.json', import.meta.url);

export function loadCatalog(path: URL | string = catalogPath): Catalog {
  return JSON.parse(readFileSync(path, 'utf8')) as Catalog;
}

const histogramSuffixes = ['_bucket', '_sum', '_count'];

/** The exported metric a series name belongs to, or undefined if podvol exports no such series. */
export function familyOf(catalog: Catalog, series: string): MetricSpec | undefined {
  for (const m of catalog.metrics) {
    if (m.name === series) return m.type === 'histogram' ? undefined : m;
    if (m.type === 'histogram' && histogramSuffixes.some((s) => series === m.name + s)) return m;
  }
  return undefined;
}

export interface NameCheckOptions {
  /** Allow series Prometheus makes itself (up), which only alerts need. */
  allowSynthetic: boolean;
}

/** True when a query may name this series: podvol's own, prom-client's defaults, and optionally `up`. */
export function isAllowedSeries(catalog: Catalog, series: string, opts: NameCheckOptions): boolean {
  if (familyOf(catalog, series)) return true;
  if (catalog.defaultMetricPrefixes.some((p) => series.startsWith(p))) return true;
  return opts.allowSynthetic && catalog.prometheusSynthetic.includes(series);
}
