// Prints the dashboard's queries as a Prometheus rules file so that
// `promtool check rules` parses every one of them (.ci/checks.sh).
import { stringify } from 'yaml';
import { loadDashboard, panelQueries, substituteGrafanaVariables } from '../dashboard.ts';

const rules = panelQueries(loadDashboard()).map((q, i) => ({
  record: `dashboard:query_${i + 1}`,
  expr: substituteGrafanaVariables(q.expr),
  labels: { panel: q.panel },
}));
process.stdout.write(stringify({ groups: [{ name: 'podvol-dashboard-queries', rules }] }));
