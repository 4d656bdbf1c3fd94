import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf } from '../support/markdown.js';
import { arr, catalogueName, metricNames, obj, readYaml, repoPath, str, type Json } from './support.js';

/**
 * deploy/prometheus, what Node can check: every alert has a unit-test case that fires and one
 * that stays silent, uses catalogue metrics and names a runbook that exists; both scrape configs
 * scrape the job the rules select. What promtool says of the same files (check rules, test
 * rules, check config) is in test/deploy-tools/ (`npm run check:deploy`).
 */
const PROMETHEUS_DIR = repoPath('deploy', 'prometheus');
const RULES_FILE = join('rules', 'card-gateway.rules.yml');
const TESTS_FILE = join('tests', 'card-gateway.rules.test.yml');

interface Alert {
  name: string;
  expr: string;
  labels: Record<string, Json>;
  annotations: Record<string, Json>;
}

function alerts(): Alert[] {
  const groups = arr(obj(readYaml('deploy', 'prometheus', RULES_FILE), 'rules file')['groups'], 'groups');
  return groups.flatMap((group, g) =>
    arr(obj(group, `groups[${g}]`)['rules'], `groups[${g}].rules`).map((rule, r) => {
      const at = `groups[${g}].rules[${r}]`;
      const fields = obj(rule, at);
      return {
        name: str(fields['alert'], `${at}.alert`),
        expr: str(fields['expr'], `${at}.expr`),
        labels: obj(fields['labels'], `${at}.labels`),
        annotations: obj(fields['annotations'], `${at}.annotations`),
      };
    }),
  );
}

describe('alert rules', () => {
  it('cover the alerts the operators asked for', () => {
    const expressions = alerts().map((alert) => alert.expr).join('\n');
    for (const wanted of [
      'gateway_store_up == 0',
      'gateway_store_down_reason{reason="out_of_memory"}',
      'gateway_store_memory_used_ratio',
      'gateway_connector_errors_total',
      'status_code=~"5.."',
      'limiter="login_lockout"',
      'gateway_refresh_reuse_detected_total',
      'gateway_audit_writable == 0',
      'gateway_connector_pool_saturated',
      'gateway_tls_certificate_expiry_timestamp_seconds',
      'gateway_log_lines_dropped_total',
      'reason="outsider_cap"',
      // Latency clients feel: the p99 of card creation (issue 32).
      'histogram_quantile(0.99',
      // Events (issue 33): a backlog that grows, an endpoint failing, an endpoint stopped by a 410.
      'gateway_event_oldest_pending_age_seconds',
      'gateway_event_deliveries_total{outcome=~"retry|failed"}',
      'gateway_event_endpoint_stopped',
    ]) {
      expect(expressions, wanted).toContain(wanted);
    }
  });

  it('have, for every alert, a unit test where it fires and one where it stays silent', () => {
    const tests = arr(obj(readYaml('deploy', 'prometheus', TESTS_FILE), 'tests file')['tests'], 'tests');
    const firing = new Set<string>();
    const silent = new Set<string>();
    tests.forEach((test, t) => {
      const cases = obj(test, `tests[${t}]`)['alert_rule_test'];
      if (cases === undefined) return;
      arr(cases, `tests[${t}].alert_rule_test`).forEach((entry, c) => {
        const at = `tests[${t}].alert_rule_test[${c}]`;
        const fields = obj(entry, at);
        const name = str(fields['alertname'], `${at}.alertname`);
        const expected = arr(fields['exp_alerts'] ?? [], `${at}.exp_alerts`);
        (expected.length > 0 ? firing : silent).add(name);
      });
    });
    const names = alerts().map((alert) => alert.name);
    expect(names.length).toBeGreaterThanOrEqual(10);
    expect(names.filter((name) => !firing.has(name)), 'alerts without a firing case').toEqual([]);
    expect(names.filter((name) => !silent.has(name)), 'alerts without a silent case').toEqual([]);
  });

  it('use only metrics of the gateway catalogue', () => {
    for (const alert of alerts()) {
      for (const name of metricNames(alert.expr)) expect(catalogueName(name), `${alert.name}: ${name}`).toBeDefined();
    }
  });

  it('carry a severity and a runbook URL: the base URL setting, then a runbook of docs/runbooks/ that exists', () => {
    for (const alert of alerts()) {
      expect(['warning', 'critical'], alert.name).toContain(alert.labels['severity']);
      expect(typeof alert.annotations['summary'], alert.name).toBe('string');
      expect(alert.annotations['runbook'], `${alert.name}: the old repository-path annotation`).toBeUndefined();
      const url = str(alert.annotations['runbook_url'], `${alert.name}.annotations.runbook_url`);
      expect(url.startsWith(RUNBOOK_BASE), `${alert.name}: ${url}`).toBe(true);
      const [file = '', anchor] = url.slice(RUNBOOK_BASE.length).split('#');
      expect(file, alert.name).toMatch(/^docs\/runbooks\/[a-z0-9-]+\.md$/);
      expect(existsSync(repoPath(file)), `${alert.name}: ${file}`).toBe(true);
      if (anchor !== undefined) expect([...anchorsOf(readFileSync(repoPath(file), 'utf8'))], `${alert.name}: ${url}`).toContain(anchor);
    }
  });

  it("have a section in docs/runbooks/alerts.md each, or a row of its table naming the runbook the alert links to", () => {
    const page = readFileSync(repoPath('docs', 'runbooks', 'alerts.md'), 'utf8');
    for (const alert of alerts()) {
      const file = str(alert.annotations['runbook_url'], alert.name).slice(RUNBOOK_BASE.length).split('#')[0];
      if (file === 'docs/runbooks/alerts.md') expect(page, alert.name).toMatch(new RegExp(`^## ${alert.name}$`, 'm'));
      else expect(page, alert.name).toMatch(new RegExp(`^\\| [^|]*\`${alert.name}\``, 'm'));
    }
  });
});

/** What every runbook_url starts with: the external label both Prometheus configs set. */
const RUNBOOK_BASE = '{{ $externalLabels.runbook_base_url }}/';

describe('scrape configs', () => {
  it("both set the runbooks' base URL the alerts link with: absolute, no trailing slash", () => {
    for (const file of ['prometheus.yml', 'prometheus-kubernetes.yml']) {
      const global = obj(obj(readYaml('deploy', 'prometheus', file), file)['global'], `${file}: global`);
      const base = str(obj(global['external_labels'], `${file}: global.external_labels`)['runbook_base_url'], `${file}: runbook_base_url`);
      expect(base, file).toMatch(/^https:\/\/[^\s]+[^/]$/);
    }
  });

  it('both scrape the job the alert rules select', () => {
    for (const file of ['prometheus.yml', 'prometheus-kubernetes.yml']) {
      const jobs = arr(obj(readYaml('deploy', 'prometheus', file), file)['scrape_configs'], `${file}: scrape_configs`);
      expect(jobs.map((job, index) => obj(job, `${file}: scrape_configs[${index}]`)['job_name']), file).toContain('card-gateway');
    }
    expect(readFileSync(join(PROMETHEUS_DIR, RULES_FILE), 'utf8')).toContain('up{job="card-gateway"}');
  });
});
