import { describe, expect, it } from 'vitest';
import { readDashboard } from './dashboard.js';
import { arr, catalogueName, metricNames, num, obj, type JsonObject } from './support.js';

/**
 * deploy/grafana/card-gateway.json: valid JSON, queries over catalogue metrics only (that each
 * is valid PromQL is promtool's to say: test/deploy-tools/, `npm run check:deploy`), panels that do not overlap, and the
 * subjects the operators asked for.
 */
const { dashboard, panels, queries } = readDashboard();

describe('Grafana dashboard', () => {
  it('has a stable uid, a data source variable and job and replica variables', () => {
    expect(dashboard['uid']).toBe('card-gateway');
    const variables = arr(obj(dashboard['templating'], 'templating')['list'], 'templating.list').map((v, i) => obj(v, `variables[${i}]`));
    expect(variables.map((variable) => variable['name'])).toEqual(['datasource', 'job', 'instance']);
    expect(variables[0]?.['type']).toBe('datasource');
    expect(variables[0]?.['query']).toBe('prometheus');
  });

  it('uses only metrics of the gateway catalogue, each filtered to the chosen job and replicas', () => {
    for (const query of queries) {
      const names = metricNames(query.expr);
      expect(names.length, query.panel).toBeGreaterThan(0);
      for (const name of names) expect(catalogueName(name), `${query.panel}: ${name}`).toBeDefined();
      const selectors = query.expr.match(/\b[a-z][a-z0-9_]*\{[^}]*\}/g) ?? [];
      expect(selectors.length, query.panel).toBeGreaterThan(0);
      for (const selector of selectors) expect(selector, query.panel).toContain('job="$job", instance=~"$instance"');
    }
  });

  it('covers what the operators asked for', () => {
    const all = queries.map((query) => query.expr).join('\n');
    for (const metric of [
      'gateway_http_requests_total',
      'gateway_http_request_duration_seconds_bucket',
      'gateway_cards_created_total',
      'gateway_card_replays_total',
      'gateway_card_reveals_total',
      'gateway_connector_request_duration_seconds_bucket',
      'gateway_connector_errors_total',
      'gateway_connector_pool_in_flight',
      'gateway_connector_pool_saturated',
      'gateway_store_up',
      'gateway_store_command_duration_seconds_bucket',
      'gateway_logins_total',
      'gateway_refreshes_total',
      'gateway_rate_limited_total',
      'gateway_access_denied_total',
      'gateway_audit_writable',
      'gateway_connections_open',
      'gateway_connections_refused_total',
      'gateway_events_recorded_total',
      'gateway_connector_events_total',
      'gateway_event_deliveries_total',
      'gateway_event_delivery_duration_seconds_bucket',
      'gateway_event_backlog',
      'gateway_event_failed_deliveries',
      'gateway_event_oldest_pending_age_seconds',
      'gateway_event_endpoint_stopped',
    ]) {
      expect(all, metric).toContain(metric);
    }
  });

  it('lays panels out without overlaps inside 24 columns, with unique ids and the data source variable', () => {
    const ids = panels.map((panel) => num(panel['id'], 'id'));
    expect(new Set(ids).size).toBe(ids.length);
    const boxes = panels.map((panel) => {
      const grid: JsonObject = obj(panel['gridPos'], `${String(panel['title'])}.gridPos`);
      return { title: String(panel['title']), x: num(grid['x'], 'x'), y: num(grid['y'], 'y'), w: num(grid['w'], 'w'), h: num(grid['h'], 'h') };
    });
    for (const box of boxes) expect(box.x + box.w, box.title).toBeLessThanOrEqual(24);
    for (const [i, a] of boxes.entries()) {
      for (const b of boxes.slice(i + 1)) {
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect(overlap, `${a.title} / ${b.title}`).toBe(false);
      }
    }
    for (const panel of panels.filter((p) => p['type'] !== 'row')) {
      expect(obj(panel['datasource'], `${String(panel['title'])}.datasource`)['uid'], String(panel['title'])).toBe('${datasource}');
    }
  });
});
