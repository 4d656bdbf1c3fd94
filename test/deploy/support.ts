import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

/** Shared by the deploy/ tests: the repository root, YAML reading, the metric catalogue. */
export const REPO = join(import.meta.dirname, '..', '..');

export function repoPath(...parts: string[]): string {
  return join(REPO, ...parts);
}

/** A parsed YAML or JSON value, narrowed by the helpers below rather than cast. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The member `key` of `value`, which must be an object: a failing test names the path. */
export function obj(value: Json | undefined, path: string): JsonObject {
  if (!isObject(value)) throw new Error(`${path}: expected an object, got ${JSON.stringify(value)}`);
  return value;
}

export function arr(value: Json | undefined, path: string): Json[] {
  if (!Array.isArray(value)) throw new Error(`${path}: expected a list, got ${JSON.stringify(value)}`);
  return value;
}

export function str(value: Json | undefined, path: string): string {
  if (typeof value !== 'string') throw new Error(`${path}: expected a string, got ${JSON.stringify(value)}`);
  return value;
}

export function num(value: Json | undefined, path: string): number {
  if (typeof value !== 'number') throw new Error(`${path}: expected a number, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * One YAML file. `merge: true` resolves `<<:` merge keys as Docker Compose (YAML 1.1) does;
 * `uniqueKeys` stays on so that a key written twice is an error, not a silent override.
 */
export function readYaml(...parts: string[]): Json {
  return parse(readFileSync(repoPath(...parts), 'utf8'), { merge: true, uniqueKeys: true }) as Json;
}

export function readYamlDocuments(...parts: string[]): Json[] {
  const documents = parseAllDocuments(readFileSync(repoPath(...parts), 'utf8'), { merge: true, uniqueKeys: true });
  if (!Array.isArray(documents)) throw new Error(`${parts.join('/')}: no YAML document`);
  return documents.map((document, index) => {
    if (document.errors.length > 0) throw new Error(`${parts.join('/')} document ${index}: ${document.errors.map((e) => e.message).join('; ')}`);
    return document.toJS() as Json;
  });
}

/**
 * The metric names the rules and the dashboard may use: the gateway's catalogue for issues 10
 * and 12 (today's metrics plus the planned ones), prom-client's default process and Node.js
 * metrics, and Prometheus's own `up`. A name outside it is a typo or a metric the gateway does
 * not expose; a metric renamed in src/ must be renamed here and in deploy/.
 */
export const METRIC_CATALOGUE: ReadonlySet<string> = new Set([
  // existing
  'gateway_http_requests_total',
  'gateway_http_request_duration_seconds',
  'gateway_logins_total',
  'gateway_refreshes_total',
  'gateway_logouts_total',
  'gateway_rate_limited_total',
  'gateway_refresh_reuse_detected_total',
  'gateway_access_denied_total',
  'gateway_cards_created_total',
  'gateway_card_replays_total',
  'gateway_card_reveals_total',
  'gateway_connector_request_duration_seconds',
  'gateway_connector_errors_total',
  'gateway_store_unavailable_total',
  'gateway_connections_open',
  'gateway_connections_refused_total',
  'gateway_address_budget_refusals_total',
  'gateway_client_errors_total',
  'gateway_audit_writable',
  'gateway_audit_write_failures_total',
  'gateway_audit_refusals_total',
  'gateway_audit_lines_dropped_total',
  'gateway_log_lines_dropped_total',
  'gateway_password_hash_busy_total',
  'gateway_connector_pool_in_flight',
  'gateway_connector_pool_queued',
  'gateway_idempotency_waiters',
  'gateway_idempotency_waiters_refused_total',
  // planned (issues 10 and 12)
  'gateway_build_info',
  'gateway_config_reloads_total',
  'gateway_token_failures_total',
  'gateway_idempotency_conflicts_total',
  'gateway_idempotency_payload_mismatches_total',
  'gateway_store_command_duration_seconds',
  'gateway_connector_pool_saturated',
  'gateway_tls_certificate_expiry_timestamp_seconds',
  'gateway_store_up',
  'gateway_store_info',
  'gateway_store_master_changes_total',
  // D48 (issue 19): the card operations after creation
  'gateway_card_operations_total',
  'gateway_connector_call_duration_seconds',
  'gateway_connector_foreign_records_total',
  // D54, D55 (issue 22)
  'gateway_store_down_reason',
  'gateway_store_operation_failures_total',
  'gateway_store_memory_used_ratio',
  // D63-D66 (issue 33): events and their deliveries
  'gateway_events_recorded_total',
  'gateway_connector_events_total',
  'gateway_event_deliveries_total',
  'gateway_event_delivery_duration_seconds',
  'gateway_event_backlog',
  'gateway_event_failed_deliveries',
  'gateway_event_oldest_pending_age_seconds',
  'gateway_event_endpoint_stopped',
  // prom-client defaults used by the dashboard
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'nodejs_heap_size_used_bytes',
  'nodejs_eventloop_lag_p99_seconds',
  // Prometheus
  'up',
]);

/** Histogram series carry one of these suffixes on a catalogue name. */
const HISTOGRAM_SUFFIXES = ['_bucket', '_count', '_sum'];

/** Metric names in a PromQL expression (identifiers before `{`, `[` or alone, not functions or labels). */
export function metricNames(expression: string): string[] {
  // Label matchers and strings carry no metric names; drop them before scanning.
  const stripped = expression.replace(/\{[^}]*\}/g, '{}').replace(/"[^"]*"/g, '""');
  const names = stripped.match(/\b(?:gateway|process|nodejs)_[a-z0-9_]+\b|\bup\b/g) ?? [];
  return [...new Set(names)];
}

/** The catalogue name a series name belongs to, or undefined. */
export function catalogueName(series: string): string | undefined {
  if (METRIC_CATALOGUE.has(series)) return series;
  for (const suffix of HISTOGRAM_SUFFIXES) {
    if (series.endsWith(suffix) && METRIC_CATALOGUE.has(series.slice(0, -suffix.length))) return series.slice(0, -suffix.length);
  }
  return undefined;
}

/** A `{ file }` or `{ env }` secret reference in a gateway config, with where it sits. */
export interface SecretReference {
  field: string;
  file?: string;
  env?: string;
}

/** Every secret reference in a gateway config: objects whose only member is `file` or `env`. */
export function secretReferences(config: Json, field = ''): SecretReference[] {
  if (Array.isArray(config)) return config.flatMap((item, index) => secretReferences(item, `${field}[${index}]`));
  if (!isObject(config)) return [];
  const keys = Object.keys(config);
  if (keys.length === 1 && keys[0] === 'file') return [{ field, file: str(config['file'], field) }];
  if (keys.length === 1 && keys[0] === 'env') return [{ field, env: str(config['env'], field) }];
  return keys.flatMap((key) => secretReferences(config[key] ?? null, field === '' ? key : `${field}.${key}`));
}

/** The longest drain the gateway allows after its shutdown delay (src/main.ts exits after 25 s). */
export const DRAIN_LIMIT_SECONDS = 25;
