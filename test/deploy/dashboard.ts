import { readFileSync } from 'node:fs';
import { arr, obj, repoPath, str, type Json, type JsonObject } from './support.js';

/** One query of a dashboard panel. */
export interface DashboardQuery {
  panel: string;
  expr: string;
}

/** deploy/grafana/card-gateway.json read once: the document, its panels and every panel query. */
export function readDashboard(): { dashboard: JsonObject; panels: JsonObject[]; queries: DashboardQuery[] } {
  const dashboard = obj(JSON.parse(readFileSync(repoPath('deploy', 'grafana', 'card-gateway.json'), 'utf8')) as Json, 'dashboard');
  const panels = arr(dashboard['panels'], 'panels').map((p, i) => obj(p, `panels[${i}]`));
  const queries = panels.flatMap((panel) =>
    arr(panel['targets'] ?? [], `${String(panel['title'])}.targets`).map((t, i) => ({
      panel: str(panel['title'], 'title'),
      expr: str(obj(t, `${String(panel['title'])}.targets[${i}]`)['expr'], 'expr'),
    })),
  );
  return { dashboard, panels, queries };
}

/** What Grafana substitutes before the query reaches Prometheus. */
export function substituted(expression: string): string {
  return expression.replaceAll('$__rate_interval', '5m').replaceAll('$job', 'card-gateway').replaceAll('$instance', '.*');
}
