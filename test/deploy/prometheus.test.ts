import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { at, must } from '../helpers/must.ts';
import { isAllowedSeries, loadCatalog } from './catalog.ts';
import { loadDashboard, panelQueries, variableQueries } from './dashboard.ts';
import { metricNamesInPromQL, metricNamesInVariableQuery } from './promql.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const catalog = loadCatalog();
const dashboard = loadDashboard();

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
const alerts = parse(read('deploy/prometheus/alerts.yaml')) as { groups: { name: string; rules: Rule[] }[] };
const rules = alerts.groups.flatMap((g) => g.rules);

describe('deploy/prometheus/metrics.json', () => {
  test('lists each metric once, with a type, labels and help', () => {
    const names = catalog.metrics.map((m) => m.name);
    assert.equal(new Set(names).size, names.length);
    for (const m of catalog.metrics) {
      assert.ok(['counter', 'gauge', 'histogram'].includes(m.type), m.name);
      assert.equal(m.type === 'counter', m.name.endsWith('_total'), `${m.name}: only counters end in _total`);
      assert.ok(m.help.length > 10 && Array.isArray(m.labels), m.name);
    }
  });

  test('is the metrics reference table of docs/operating.md', () => {
    const rows = new Map(
      read('docs/operating.md')
        .split('\n')
        .map((l) => /^\|\s*`([a-z_:]+)`\s*\|\s*(\w+)\s*\|([^|]*)\|/.exec(l))
        .filter((m) => m !== null)
        .map((m) => [m[1], { type: m[2], labels: [...at(m, 3).matchAll(/`(\w+)`/g)].map((x) => x[1]) }]),
    );
    for (const m of catalog.metrics) {
      assert.deepEqual(rows.get(m.name), { type: m.type, labels: m.labels }, `docs row for ${m.name}`);
    }
  });
});

describe('deploy/prometheus/dashboard.json', () => {
  const queries = panelQueries(dashboard);

  test('has queries for every podvol metric family', () => {
    const used = new Set(queries.flatMap((q) => metricNamesInPromQL(q.expr)));
    for (const m of catalog.metrics) {
      const series =
        m.type === 'histogram' ? [`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`] : [m.name];
      assert.ok(
        series.some((s) => used.has(s)),
        `no panel shows ${m.name}`,
      );
    }
  });

  test('names only metrics podvol exports', () => {
    const named = [
      ...queries.flatMap((q) => metricNamesInPromQL(q.expr).map((n): [string, string] => [q.panel, n])),
      ...variableQueries(dashboard).flatMap((v) =>
        metricNamesInVariableQuery(v.query).map((n): [string, string] => [`$${v.variable}`, n]),
      ),
    ];
    assert.ok(named.length > 20);
    const unknown = named.filter(([, n]) => !isAllowedSeries(catalog, n, { allowSynthetic: false }));
    assert.deepEqual(unknown, []);
  });

  test('filters every query by job and the node variable', () => {
    for (const q of queries) {
      for (const selector of q.expr.match(/[a-z_:]+\{[^}]*\}/g) ?? []) {
        assert.match(selector, /job="podvol", instance=~"\$instance"/, `${q.panel}: ${selector}`);
      }
    }
  });

  test('panels have unique ids and a data source variable', () => {
    const ids = dashboard.panels.map((p) => (p as { id: number }).id);
    assert.equal(new Set(ids).size, ids.length);
    assert.ok(variableQueries(dashboard).some((v) => v.variable === 'instance'));
  });
});

describe('deploy/prometheus/alerts.yaml', () => {
  test('covers failing operations, stuck volumes, a stale pod watch, reconstruction errors, a claim almost full and an emptyDir over its sizeLimit', () => {
    const names = rules.map((r) => r.alert);
    for (const a of [
      'PodvolVolumeOperationsFailing',
      'PodvolVolumesStuckNotReady',
      'PodvolPodWatchStale',
      'PodvolReconstructionErrors',
      'PodvolVolumeAlmostFull',
      'PodvolEmptyDirOverSizeLimit',
    ]) {
      assert.ok(names.includes(a), a);
    }
  });

  test('a target that vanishes is caught as well as one that is down: absent() for the job, per node too', () => {
    const expr = (name: string) =>
      rules
        .find((r) => r.alert === name)
        ?.expr.replace(/\s+/g, ' ')
        .trim();
    assert.equal(expr('PodvolDown'), 'up{job="podvol"} == 0');
    assert.equal(expr('PodvolAbsent'), 'absent(up{job="podvol"})');
    assert.match(
      expr('PodvolTargetVanished') ?? '',
      /present_over_time\(up\{job="podvol"\}\[1h\]\).* unless on \(job, instance\)/,
    );
  });

  test('every rule names only podvol metrics (or up), has a severity, summary and description', () => {
    for (const r of rules) {
      for (const n of metricNamesInPromQL(r.expr)) {
        assert.ok(isAllowedSeries(catalog, n, { allowSynthetic: true }), `${r.alert}: ${n}`);
      }
      assert.match(must(r.labels.severity, `${r.alert} severity`), /^(warning|critical)$/, r.alert);
      assert.ok(r.annotations.summary && r.annotations.description, r.alert);
    }
  });

  test('every alert has a promtool unit test', () => {
    const tests = parse(read('deploy/prometheus/alerts.test.yaml')) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const fired = new Set(
      tests.tests.flatMap((t) =>
        t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    for (const r of rules) assert.ok(fired.has(r.alert), `no test expects ${r.alert} to fire`);
  });

  test('prometheusrule.yaml carries the same rules for prometheus-operator', () => {
    const pr = parse(read('deploy/prometheus/prometheusrule.yaml')) as { kind: string; spec: unknown };
    assert.equal(pr.kind, 'PrometheusRule');
    assert.deepEqual(pr.spec, alerts);
  });
});

describe('scrape configuration', () => {
  test('the Kubernetes job keeps the metrics port and names instances after nodes', () => {
    const jobs = parse(read('deploy/prometheus/scrape-kubernetes.yaml')) as {
      job_name: string;
      relabel_configs: { source_labels: string[]; target_label?: string; action?: string; regex?: string }[];
    }[];
    const job = at(jobs, 0, 'scrape job');
    assert.equal(job.job_name, 'podvol', 'the alerts select job="podvol"');
    assert.ok(job.relabel_configs.some((r) => r.action === 'keep' && r.regex === 'metrics'));
    const instance = job.relabel_configs.find((r) => r.target_label === 'instance');
    assert.deepEqual(instance?.source_labels, ['__meta_kubernetes_pod_node_name']);
  });

  test("the Kubernetes job scrapes over HTTPS with the service account's token", () => {
    const jobs = parse(read('deploy/prometheus/scrape-kubernetes.yaml')) as {
      scheme: string;
      authorization?: { credentials_file?: string };
    }[];
    const job = at(jobs, 0, 'scrape job');
    assert.equal(job.scheme, 'https');
    assert.equal(job.authorization?.credentials_file, '/var/run/secrets/kubernetes.io/serviceaccount/token');
  });

  test("the ServiceMonitor scrapes over HTTPS with the service account's token", () => {
    const monitor = at(parseAllDocuments(read('deploy/prometheus/servicemonitor.yaml')), 1).toJS() as {
      spec: { endpoints: { scheme?: string; bearerTokenFile?: string }[] };
    };
    for (const e of monitor.spec.endpoints) {
      assert.equal(e.scheme, 'https');
      assert.equal(e.bearerTokenFile, '/var/run/secrets/kubernetes.io/serviceaccount/token');
    }
  });

  test('the bare-metal job scrapes over HTTPS with a client certificate', () => {
    const cfg = parse(read('deploy/prometheus/prometheus.yml')) as {
      scrape_configs: { scheme: string; tls_config?: { cert_file?: string; key_file?: string } }[];
    };
    const job = at(cfg.scrape_configs, 0, 'scrape job');
    assert.equal(job.scheme, 'https');
    assert.ok(job.tls_config?.cert_file && job.tls_config.key_file);
  });

  test('the ServiceMonitor scrapes the metrics port as job podvol', () => {
    const [service, monitor] = parseAllDocuments(read('deploy/prometheus/servicemonitor.yaml')).map((d) =>
      d.toJS(),
    ) as [
      {
        spec: { clusterIP: string; ports: { name: string; port: number }[] };
        metadata: { labels: Record<string, string> };
      },
      { spec: { jobLabel: string; endpoints: { port: string; path: string }[] } },
    ];
    assert.equal(service.spec.clusterIP, 'None');
    assert.deepEqual(
      service.spec.ports.map((p) => [p.name, p.port]),
      [['metrics', 10280]],
    );
    assert.equal(service.metadata.labels[monitor.spec.jobLabel], 'podvol');
    assert.deepEqual(
      monitor.spec.endpoints.map((e) => [e.port, e.path]),
      [['metrics', '/metrics']],
    );
  });

  test('the bare-metal configuration loads the alerting rules', () => {
    const cfg = parse(read('deploy/prometheus/prometheus.yml')) as {
      rule_files: string[];
      scrape_configs: { job_name: string }[];
    };
    assert.deepEqual(cfg.rule_files, ['alerts.yaml']);
    assert.deepEqual(
      cfg.scrape_configs.map((s) => s.job_name),
      ['podvol'],
    );
  });
});
