// Reads the Grafana dashboard's queries, shared by the tests and by
// .ci/checks.sh (which hands them to promtool).
import { readFileSync } from 'node:fs';

export const dashboardPath = new URL('../../deploy/prometheus/dashboard.json', import.meta.url);

export interface PanelQuery {
  panel: string;
  expr: string;
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

interface Dashboard {
  panels: Panel[];
  templating?: { list: { name: string; type: string; query?: string | { query?: string } }[] };
}

export function loadDashboard(path: URL | string = dashboardPath): Dashboard {
  return JSON.parse(readFileSync(path, 'utf8')) as Dashboard;
}

export function panelQueries(d: Dashboard): PanelQuery[] {
  const walk = (panels: Panel[]): PanelQuery[] =>
    panels.flatMap((p) => [
      ...(p.targets ?? []).flatMap((t) => (t.expr ? [{ panel: p.title ?? '(untitled)', expr: t.expr }] : [])),
      ...walk(p.panels ?? []),
    ]);
  return walk(d.panels);
}

export function variableQueries(d: Dashboard): { variable: string; query: string }[] {
  return (d.templating?.list ?? []).flatMap((v) => {
    if (v.type !== 'query' || v.query === undefined) return [];
    const query = typeof v.query === 'string' ? v.query : v.query.query;
    return query ? [{ variable: v.name, query }] : [];
  });
}

/** Replace Grafana's variables with values that keep the expression valid PromQL. */
export function substituteGrafanaVariables(expr: string): string {
  return expr
    .replace(/\$__rate_interval|\$\{__rate_interval\}|\$__interval|\$\{__interval\}/g, '1m')
    .replace(/\$__range|\$\{__range\}/g, '1h')
    .replace(/\$\{?\w+\}?/g, '.*');
}
