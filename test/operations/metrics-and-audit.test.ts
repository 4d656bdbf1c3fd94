import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Gauge } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminServer } from '../../src/edge/admin-server.js';
import { createLogger } from '../../src/observability/logger.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { METRIC_CATALOGUE } from '../deploy/support.js';
import { setConnectorMode } from '../support/card-fixture.js';
import { PASSWORD, rawTestConfig, testCertificatePem, testKeys, writeTestConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { metricNameProblems, parsePrometheusText, seriesValue, type MetricFamily } from './prometheus-text.js';
import {
  auditLines,
  builtEntryPoints,
  call,
  cardBody,
  CARDS_PATH,
  killAll,
  loginOver,
  postCard,
  REPO,
  scrape,
  startGateway,
  waitForAudit,
  type GatewayProcess,
} from './support.js';

/**
 * The metrics of a real gateway process, read with a strict parser of the text format and with
 * the Node-only form of promtool's name lint (promtool itself reads a live exposition in
 * test/deploy-tools/, `npm run check:deploy`): every catalogue name is exposed, known label values are there at 0
 * from the start, build info names the version and commit, and traffic moves the right series.
 * The audit file of the same process gets `card.failed` with the failure kind when the
 * connector fails (502) or times out (504).
 */

/** Prometheus's own series, never the gateway's. */
const PROMETHEUS_SERIES: ReadonlySet<string> = new Set(['up']);

/** Label values the plan names for each labelled counter: exposed at 0 before their first event. */
const KNOWN_AT_ZERO: readonly { metric: string; label: string; values: readonly string[]; also?: Record<string, string> }[] = [
  { metric: 'gateway_config_reloads_total', label: 'outcome', values: ['success', 'failure'] },
  {
    metric: 'gateway_token_failures_total',
    label: 'reason',
    values: ['token_missing', 'token_malformed', 'token_invalid', 'token_expired', 'token_in_url'],
  },
  { metric: 'gateway_logins_total', label: 'outcome', values: ['succeeded', 'failed', 'rate_limited', 'locked_out'] },
  { metric: 'gateway_refreshes_total', label: 'outcome', values: ['succeeded', 'rate_limited', 'unknown', 'mismatch', 'revoked', 'expired', 'reuse'] },
  { metric: 'gateway_logouts_total', label: 'outcome', values: ['succeeded', 'failed'] },
  { metric: 'gateway_rate_limited_total', label: 'limiter', values: ['login', 'login_address', 'refresh', 'login_lockout'] },
  // Per call since issue 31 (D60): creation's, and each lifecycle call's.
  ...['create', 'get', 'list', 'status'].map((operation) => ({
    metric: 'gateway_connector_errors_total',
    label: 'kind',
    values: ['refused', 'reset', 'timeout', 'status', 'invalid_answer', 'error'],
    also: { operation },
  })),
  { metric: 'gateway_connections_refused_total', label: 'reason', values: ['connection_cap', 'outsider_cap'] },
  { metric: 'gateway_client_errors_total', label: 'kind', values: ['malformed_request', 'headers_too_large', 'request_timeout', 'tls'] },
  {
    metric: 'gateway_access_denied_total',
    label: 'reason',
    values: [
      'address_not_allowed',
      'https_required',
      'token_missing',
      'token_invalid',
      'token_expired',
      'unknown_credential',
      'credential_inactive',
      'address',
      'permission_denied',
      'reveal_not_creator',
    ],
  },
  {
    metric: 'gateway_connector_request_duration_seconds_count',
    label: 'outcome',
    values: ['ok', 'timeout', 'status', 'refused', 'reset', 'invalid_answer', 'error'],
    also: { operation: 'create' },
  },
  ...['get', 'list', 'status'].map((operation) => ({
    metric: 'gateway_connector_request_duration_seconds_count',
    label: 'outcome',
    values: ['ok'],
    also: { operation },
  })),
  {
    metric: 'gateway_store_operation_failures_total',
    label: 'reason',
    values: ['unreachable', 'timed_out', 'authentication_refused', 'out_of_memory', 'evicting_policy', 'read_only'],
  },
  {
    metric: 'gateway_store_down_reason',
    label: 'reason',
    values: ['unreachable', 'timed_out', 'authentication_refused', 'out_of_memory', 'evicting_policy', 'read_only'],
  },
  {
    metric: 'gateway_store_command_duration_seconds_count',
    label: 'operation',
    values: ['reserve', 'complete', 'release', 'peek', 'rotate', 'revoke', 'create_family', 'limiter', 'lockout', 'ping'],
  },
];

/** Unlabelled counters and gauges that start at a known value. */
const STARTING_VALUES: Record<string, number> = {
  gateway_cards_created_total: 0,
  gateway_card_replays_total: 0,
  gateway_card_reveals_total: 0,
  gateway_idempotency_conflicts_total: 0,
  gateway_idempotency_payload_mismatches_total: 0,
  gateway_refresh_reuse_detected_total: 0,
  gateway_store_unavailable_total: 0,
  gateway_audit_writable: 1,
  gateway_audit_write_failures_total: 0,
  gateway_connector_pool_saturated: 0,
  gateway_connector_pool_queued: 0,
  gateway_idempotency_waiters: 0,
  gateway_store_memory_used_ratio: 0,
};

function checkedScrape(text: string): Map<string, MetricFamily> {
  const families = parsePrometheusText(text);
  expect(metricNameProblems(families), 'the name lint of promtool check metrics').toEqual([]);
  return families;
}

describe('metrics and audit of a running gateway', () => {
  let connector: RunningSandboxConnector;
  let gateway: GatewayProcess;
  let written: WrittenConfig;
  let ca: string;
  /** The first scrape after start, parsed: every test below reads it, none sets it. */
  let fresh: Map<string, MetricFamily>;
  let freshText: string;

  beforeAll(async () => {
    [connector, ca] = await Promise.all([startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true }), testCertificatePem(), builtEntryPoints()]);
    written = await writeTestConfig(await rawTestConfig({ trustedProxies: [], connector: { url: connector.url, timeoutMs: 1000 } }));
    gateway = await startGateway(written.file);
    freshText = await scrape(gateway.adminUrl);
    fresh = parsePrometheusText(freshText);
  }, 180_000);

  afterAll(async () => {
    await killAll();
    await connector?.close();
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('is valid text format for the strict parser and passes the metric name lint', () => {
    expect(checkedScrape(freshText).size).toBeGreaterThan(40);
  });

  it('exposes every metric of the catalogue', () => {
    const exposed = new Set(fresh.keys());
    const missing = [...METRIC_CATALOGUE].filter((name) => !exposed.has(name) && !PROMETHEUS_SERIES.has(name));
    expect(missing).toEqual([]);
    // And every gateway metric it exposes is in the catalogue (the rules and dashboard may use it).
    const uncatalogued = [...exposed].filter((name) => name.startsWith('gateway_') && !METRIC_CATALOGUE.has(name));
    expect(uncatalogued).toEqual([]);
  });

  it('has every known label value at 0 after a fresh start', () => {
    const missing: string[] = [];
    for (const { metric, label, values, also } of KNOWN_AT_ZERO) {
      for (const value of values) {
        const found = seriesValue(fresh, metric, { [label]: value, ...also });
        if (found !== 0) missing.push(`${metric}{${label}="${value}"${also ? ` ${JSON.stringify(also)}` : ''}} = ${String(found)}`);
      }
    }
    for (const [metric, value] of Object.entries(STARTING_VALUES)) {
      if (seriesValue(fresh, metric) !== value) missing.push(`${metric} = ${String(seriesValue(fresh, metric))}, expected ${value}`);
    }
    expect(missing).toEqual([]);
  });

  it('names the version and the commit in gateway_build_info, and the certificate expiry', async () => {
    const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim().slice(0, 12);
    const info = fresh.get('gateway_build_info');
    expect(info?.type).toBe('gauge');
    expect(info?.samples).toEqual([{ name: 'gateway_build_info', labels: { version, commit }, value: 1 }]);
    const certificate = new X509Certificate(readFileSync((await testKeys()).tlsCert));
    expect(seriesValue(fresh, 'gateway_tls_certificate_expiry_timestamp_seconds', { listener: 'api' })).toBe(
      Math.floor(Date.parse(certificate.validTo) / 1000),
    );
    expect(fresh.get('gateway_connector_request_duration_seconds')?.type).toBe('histogram');
    // A bucket between 5 s and the 10 s ceiling of connector.timeoutMs defaults.
    const les = new Set(fresh.get('gateway_connector_request_duration_seconds')?.samples.map((sample) => sample.labels['le']));
    expect(les).toContain('7.5');
  });

  it('counts traffic in the right series, and audits failed card creations with their kind', async () => {
    const token = await loginOver(gateway.httpsUrl, ca);
    const wrong = await call(`${gateway.httpsUrl}/api/v1/auth/login`, { ca, body: JSON.stringify({ username: 'full', password: `${PASSWORD}!` }) });
    expect(wrong.status).toBe(401);
    const anonymous = await call(`${gateway.httpsUrl}${CARDS_PATH}`, { ca, body: JSON.stringify(cardBody()) });
    expect(anonymous.status).toBe(401);

    const body = cardBody();
    expect((await postCard(gateway.httpsUrl, ca, token, body)).status).toBe(201);
    const mismatch = await postCard(gateway.httpsUrl, ca, token, { ...body, cardLimit: 20_000 });
    expect(mismatch.status, mismatch.body).toBe(201);
    expect(mismatch.headers['idempotency-payload-mismatch']).toBe('true');

    await setConnectorMode(connector, { mode: 'fail', status: 500, count: 1 });
    const failed = cardBody();
    const badGateway = await postCard(gateway.httpsUrl, ca, token, failed);
    expect(badGateway.status).toBe(502);
    // Held far past the 1 s deadline (closing the sandbox releases it): only the deadline can end the call.
    await setConnectorMode(connector, { mode: 'delay', delayMs: 600_000, count: 1 });
    const slow = cardBody();
    const timedOut = await postCard(gateway.httpsUrl, ca, token, slow);
    expect(timedOut.status).toBe(504);
    expect((await call(`${gateway.adminUrl}/readyz`)).status).toBe(200);

    const after = checkedScrape(await scrape(gateway.adminUrl));
    const value = (name: string, labels: Record<string, string> = {}) => seriesValue(after, name, labels);
    expect({
      loginsSucceeded: value('gateway_logins_total', { outcome: 'succeeded' }),
      loginsFailed: value('gateway_logins_total', { outcome: 'failed' }),
      tokenMissing: value('gateway_token_failures_total', { reason: 'token_missing' }),
      tokenInvalid: value('gateway_token_failures_total', { reason: 'token_invalid' }),
      cardsCreated: value('gateway_cards_created_total'),
      replays: value('gateway_card_replays_total'),
      mismatches: value('gateway_idempotency_payload_mismatches_total'),
      connectorStatus: value('gateway_connector_errors_total', { kind: 'status', operation: 'create' }),
      connectorTimeout: value('gateway_connector_errors_total', { kind: 'timeout', operation: 'create' }),
      connectorOk: value('gateway_connector_request_duration_seconds_count', { outcome: 'ok', operation: 'create' }),
      connectorTimedOut: value('gateway_connector_request_duration_seconds_count', { outcome: 'timeout', operation: 'create' }),
      created201: value('gateway_http_requests_total', { method: 'POST', route: CARDS_PATH, status_code: '201' }),
      created502: value('gateway_http_requests_total', { method: 'POST', route: CARDS_PATH, status_code: '502' }),
      created504: value('gateway_http_requests_total', { method: 'POST', route: CARDS_PATH, status_code: '504' }),
      reloads: value('gateway_config_reloads_total', { outcome: 'success' }),
    }).toEqual({
      loginsSucceeded: 1,
      loginsFailed: 1,
      tokenMissing: 1,
      tokenInvalid: 0,
      cardsCreated: 1,
      replays: 1,
      mismatches: 1,
      connectorStatus: 1,
      connectorTimeout: 1,
      connectorOk: 1,
      connectorTimedOut: 1,
      created201: 2,
      created502: 1,
      created504: 1,
      reloads: 0,
    });
    // Every store operation the card path and the readiness check used was timed.
    for (const operation of ['reserve', 'complete', 'release', 'ping'])
      expect(value('gateway_store_command_duration_seconds_count', { operation }), operation).toBeGreaterThan(0);

    const auditFile = join(written.dir, 'audit.jsonl');
    const status = await waitForAudit(auditFile, (line) => line.event === 'card.failed' && line['requestId'] === failed['requestId']);
    expect(status).toMatchObject({
      outcome: 'failure',
      credential: 'cred-full',
      reason: 'status',
      clientAddress: '127.0.0.1',
      correlationId: badGateway.headers['x-correlation-id'],
    });
    const timeout = await waitForAudit(auditFile, (line) => line.event === 'card.failed' && line['requestId'] === slow['requestId']);
    expect(timeout).toMatchObject({ outcome: 'failure', credential: 'cred-full', reason: 'timeout', correlationId: timedOut.headers['x-correlation-id'] });
    // One line each, and a created card is never also a failed one.
    const cardEvents = auditLines(auditFile).filter((line) => line.event.startsWith('card.'));
    expect(
      cardEvents.map((line) => [line.event, line['requestId'] === body['requestId'] ? 'ok' : line['requestId'] === failed['requestId'] ? '502' : '504']),
    ).toEqual([
      ['card.created', 'ok'],
      ['card.replayed', 'ok'],
      ['card.failed', '502'],
      ['card.failed', '504'],
    ]);
  });
});

describe('the strict text-format reader and the name lint refuse what Prometheus would', () => {
  const good = '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n';
  it.each([
    ['a sample without HELP or TYPE', 'b 1\n'],
    ['a bad escape', '# TYPE a gauge\na{x="\\t"} 1\n'],
    ['a series twice', `${good}a_total{x="1"} 3\n`],
    ['families interleaved', `${good}# TYPE b gauge\nb 1\na_total{x="2"} 1\n`],
    ['a value that is no number', '# TYPE a gauge\na one\n'],
    ["NaN spelt prom-client's way", '# TYPE a gauge\na Nan\n'],
    ['a histogram whose +Inf bucket is not its count', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n'],
    ['no final newline', '# TYPE a gauge\na 1'],
  ])('%s', (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });

  it('the exposition writes a NaN sample as NaN (prom-client writes Nan: the event-loop lag gauges between two close scrapes)', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    new Gauge({ name: 'test_not_a_number', help: 'A gauge set to NaN.', registers: [metrics.registry] }).set(NaN);
    expect(await metrics.registry.metrics()).toMatch(/^test_not_a_number Nan$/m);
    // As the admin listener serves it.
    const admin = buildAdminServer({ metrics, probes: [], logger: createLogger('silent'), openapi: () => ({}) });
    const text = (await admin.inject({ method: 'GET', url: '/metrics' })).body;
    await admin.close();
    expect(text).toMatch(/^test_not_a_number NaN$/m);
    expect(text).not.toMatch(/ Nan$/m);
    expect(seriesValue(parsePrometheusText(text), 'test_not_a_number')).toBeNaN();
  });

  it('the name lint flags what promtool check metrics flags, and passes a clean family', () => {
    const lint = (text: string): string[] => metricNameProblems(parsePrometheusText(text));
    expect(lint(good)).toEqual([]);
    expect(lint('# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n')).toEqual(['a_total: non-counter metrics should not have "_total" suffix']);
    expect(lint('# HELP a A.\n# TYPE a counter\na 1\n')).toEqual(['a: counter metrics should have "_total" suffix']);
    expect(lint('# TYPE a gauge\na 1\n')).toEqual(['a: no help text']);
    expect(lint('# HELP aB A.\n# TYPE aB gauge\naB 1\n')).toEqual(["aB: metric names should be written in 'snake_case' not 'camelCase'"]);
    expect(lint('# HELP a:b A.\n# TYPE a:b gauge\na:b 1\n')).toEqual(["a:b: metric names should not contain ':'"]);
    expect(lint('# HELP a_milliseconds A.\n# TYPE a_milliseconds gauge\na_milliseconds 1\n')).toEqual([
      'a_milliseconds: use base unit instead of "milliseconds"',
    ]);
  });
});
