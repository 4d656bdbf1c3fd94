import { EventMetrics } from './event-metrics.js';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { SeriesHistogram } from './series-histogram.js';

/** Label values known in advance: their series exist at 0 from the start, so a dashboard sees 0 rather than nothing after a restart. */
const KNOWN = {
  accessDenied: [
    'address_not_allowed',
    'address_malformed',
    'https_required',
    'token_missing',
    'token_malformed',
    'token_invalid',
    'token_expired',
    'token_in_url',
    'unknown_credential',
    'credential_inactive',
    'address',
    'permission_denied',
    'reveal_not_creator',
    'token_revoked',
  ],
  tokenFailures: ['token_missing', 'token_malformed', 'token_invalid', 'token_expired', 'token_in_url'],
  logins: ['succeeded', 'failed', 'rate_limited', 'locked_out'],
  refreshes: ['succeeded', 'rate_limited', 'unknown', 'mismatch', 'revoked', 'ended', 'expired', 'reuse'],
  logouts: ['succeeded', 'failed'],
  rateLimited: ['login', 'login_address', 'refresh', 'login_lockout', 'card_read', 'card_status'],
  connectorOutcomes: ['ok', 'refused', 'reset', 'timeout', 'status', 'invalid_answer', 'error'],
  connectorErrors: ['refused', 'reset', 'timeout', 'status', 'invalid_answer', 'error'],
  connectionsRefused: ['connection_cap', 'outsider_cap'],
  connectorOperations: ['create', 'get', 'list', 'status'],
  cardOperations: ['read', 'list', 'status_change'],
  addressBudgetRefusals: ['requests_per_second', 'in_flight', 'connections_per_second', 'open_connections'],
  clientErrors: ['malformed_request', 'headers_too_large', 'request_timeout', 'first_request_timeout', 'tls'],
  configReloads: ['success', 'failure'],
  storeOperations: [
    'reserve',
    'complete',
    'release',
    'peek',
    'rotate',
    'revoke',
    'create_family',
    'limiter',
    'lockout',
    'not_before',
    'ping',
    'events.record',
    'events.read',
    'events.claim',
    'events.settle',
    'events.deliveries',
    'events.redeliver',
    'events.backlog',
  ],
} as const;

export type StoreOperation = (typeof KNOWN.storeOperations)[number];
/** What a connector call came to: `ok`, or the connector port's failure kind (the label of the connector metrics). */
export type ConnectorCallResult = (typeof KNOWN.connectorOutcomes)[number];
/** Which connector call: creation, or one of the lifecycle calls (D43-D45). */
export type ConnectorOperation = (typeof KNOWN.connectorOperations)[number];
/** The card operations after creation (D48), as the `operation` label of gateway_card_operations_total. */
export type CardOperationName = (typeof KNOWN.cardOperations)[number];
/**
 * What a card operation came to: `ok` (read, listed), `changed` or `unchanged` (a status change),
 * or the error code it was answered with.
 */
export type CardOperationResult =
  | 'ok'
  | 'changed'
  | 'unchanged'
  | 'card_not_found'
  | 'card_canceled'
  | 'invalid_cursor'
  | 'connector_unavailable'
  | 'connector_invalid_answer'
  | 'connector_timeout';

/** A sample value written `Nan` (prom-client's spelling), at the end of its line. */
const NAN_SAMPLE = / Nan$/gm;

/**
 * Every metric of one gateway instance, on its own registry so that several instances in one
 * process (tests, replicas) never share counters. Labels are route templates and fixed
 * outcome words: never a path with ids, a username or a token.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** Events and their webhook deliveries (D63-D66). */
  readonly events: EventMetrics;
  readonly buildInfo: Gauge<'version' | 'commit'>;
  readonly httpRequests: Counter<'method' | 'route' | 'status_code'>;
  readonly httpDuration: SeriesHistogram<'method' | 'route' | 'status_code'>;
  readonly accessDenied: Counter<'reason'>;
  readonly tokenFailures: Counter<'reason'>;
  readonly logins: Counter<'outcome'>;
  readonly refreshes: Counter<'outcome'>;
  readonly logouts: Counter<'outcome'>;
  readonly rateLimited: Counter<'limiter'>;
  readonly reuseDetected: Counter;
  readonly cardsCreated: Counter;
  readonly cardReplays: Counter;
  readonly cardReveals: Counter;
  readonly idempotencyConflicts: Counter;
  readonly idempotencyPayloadMismatches: Counter;
  readonly connectorDuration: SeriesHistogram<'outcome' | 'operation'>;
  readonly connectorErrors: Counter<'kind' | 'operation'>;
  readonly connectorCallDuration: SeriesHistogram<'operation'>;
  readonly connectorForeignRecords: Counter<'operation'>;
  readonly cardOperations: Counter<'operation' | 'outcome'>;
  readonly storeUnavailable: Counter;
  readonly storeCommandDuration: SeriesHistogram<'operation'>;
  readonly connectionsOpen: Gauge;
  readonly connectionsRefused: Counter<'reason'>;
  readonly addressBudgetRefusals: Counter<'reason'>;
  readonly clientErrors: Counter<'kind'>;
  readonly auditWritable: Gauge;
  readonly auditWriteFailures: Counter;
  readonly auditRefusals: Counter;
  readonly auditLinesDropped: Counter;
  readonly logLinesDropped: Counter;
  readonly passwordHashBusy: Counter;
  readonly connectorPoolInFlight: Gauge;
  readonly connectorPoolQueued: Gauge;
  readonly connectorPoolSaturated: Gauge;
  readonly idempotencyWaiters: Gauge;
  readonly idempotencyWaitersRefused: Counter;
  readonly configReloads: Counter<'outcome'>;
  /** D51: one series per certificate the gateway holds. */
  readonly tlsCertificateExpiry: Gauge<'listener'>;
  /** Read at scrape time; set by whoever owns the value (the log destination, the connector pool). */
  readonly #sources: { logLinesDropped?: () => number; connectorPool?: () => { inFlight: number; queued: number } } = {};

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.events = new EventMetrics(this.registry);
    const sources = this.#sources;
    if (options.defaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      // prom-client names three gauges `*_total`, a suffix Prometheus keeps for counters
      // (`promtool check metrics` flags them); `nodejs_active_handles`, `_requests` and
      // `_resources` (by type) carry the same information under correct names.
      for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
        this.registry.removeSingleMetric(name);
    }
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = [], known: readonly string[] = []) => {
      const metric = new Counter<L>({ name, help, labelNames: [...labelNames], registers });
      for (const value of known) metric.inc({ [labelNames[0]!]: value } as Partial<Record<L, string>>, 0);
      return metric;
    };

    this.buildInfo = new Gauge({
      name: 'gateway_build_info',
      help: 'Always 1; the labels name the running version and commit.',
      labelNames: ['version', 'commit'],
      registers,
    });
    this.httpRequests = counter(
      'gateway_http_requests_total',
      'Requests answered by the public listener, by method, route template (unmatched: no route has the path; unrouted: a per-address 429 decided before routing, D53) and status.',
      ['method', 'route', 'status_code'],
    );
    this.httpDuration = new SeriesHistogram({
      name: 'gateway_http_request_duration_seconds',
      help: 'Time from request start to response end on the public listener.',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.accessDenied = counter(
      'gateway_access_denied_total',
      'Requests refused: allowlist, plain HTTP, tokens, credential address ranges, permissions, inactive credentials.',
      ['reason'],
      KNOWN.accessDenied,
    );
    this.tokenFailures = counter('gateway_token_failures_total', 'Failed bearer authentications, by reason (D34).', ['reason'], KNOWN.tokenFailures);
    this.logins = counter('gateway_logins_total', 'Login attempts by outcome.', ['outcome'], KNOWN.logins);
    this.refreshes = counter('gateway_refreshes_total', 'Refresh attempts by outcome.', ['outcome'], KNOWN.refreshes);
    this.logouts = counter('gateway_logouts_total', 'Logout attempts by outcome.', ['outcome'], KNOWN.logouts);
    this.rateLimited = counter('gateway_rate_limited_total', 'Requests refused with 429, by limiter.', ['limiter'], KNOWN.rateLimited);
    this.reuseDetected = counter('gateway_refresh_reuse_detected_total', 'Refresh tokens presented after their grace; each revoked a family (D5).');
    this.cardsCreated = counter('gateway_cards_created_total', 'Cards created at the connector.');
    this.cardReplays = counter('gateway_card_replays_total', 'Card creations answered from the idempotency record.');
    this.cardReveals = counter('gateway_card_reveals_total', 'Responses that carried full card details (D18).');
    this.idempotencyConflicts = counter(
      'gateway_idempotency_conflicts_total',
      'Card creations answered 409 because a duplicate of the requestId was still in progress.',
    );
    this.idempotencyPayloadMismatches = counter(
      'gateway_idempotency_payload_mismatches_total',
      'Replays whose payload differed from the original request (D16).',
    );
    this.connectorDuration = new SeriesHistogram({
      name: 'gateway_connector_request_duration_seconds',
      help: 'Time spent waiting for the processor-connector, by call (create, get, list, status) and outcome (ok, or the failure kind).',
      labelNames: ['outcome', 'operation'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10],
      registers,
    });
    for (const outcome of KNOWN.connectorOutcomes) this.connectorDuration.zero({ outcome, operation: 'create' });
    for (const operation of KNOWN.connectorOperations) this.connectorDuration.zero({ outcome: 'ok', operation });
    this.connectorErrors = new Counter({
      name: 'gateway_connector_errors_total',
      help: `Connector calls that failed, by call (${KNOWN.connectorOperations.join(', ')}) and kind (${KNOWN.connectorErrors.join(', ')}); a 4xx about a card id is not found, not a failure (D60).`,
      labelNames: ['kind', 'operation'],
      registers,
    });
    for (const operation of KNOWN.connectorOperations) for (const kind of KNOWN.connectorErrors) this.connectorErrors.inc({ kind, operation }, 0);
    this.connectorCallDuration = new SeriesHistogram({
      name: 'gateway_connector_call_duration_seconds',
      help: 'Time spent waiting for the processor-connector, by call: create, get, list, status (D48).',
      labelNames: ['operation'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10],
      registers,
    });
    for (const operation of KNOWN.connectorOperations) this.connectorCallDuration.zero({ operation });
    this.connectorForeignRecords = counter(
      'gateway_connector_foreign_records_total',
      'Card records the connector answered that named another issuing account (a connector bug; answered as not found), by call.',
      ['operation'],
      ['get', 'list', 'status'],
    );
    this.cardOperations = new Counter({
      name: 'gateway_card_operations_total',
      help: 'Card reads, listings and status changes, by operation and outcome (ok, changed, unchanged, or the error code answered).',
      labelNames: ['operation', 'outcome'],
      registers,
    });
    for (const operation of KNOWN.cardOperations) this.cardOperations.inc({ operation, outcome: operation === 'status_change' ? 'changed' : 'ok' }, 0);
    this.storeUnavailable = counter('gateway_store_unavailable_total', 'Requests answered 503 because the shared store did not answer (D23).');
    this.storeCommandDuration = new SeriesHistogram({
      name: 'gateway_store_command_duration_seconds',
      help: 'Time each store operation took, failures included.',
      labelNames: ['operation'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    for (const operation of KNOWN.storeOperations) this.storeCommandDuration.zero({ operation });
    this.connectionsOpen = new Gauge({ name: 'gateway_connections_open', help: 'Open connections on the public listeners (D25).', registers });
    this.connectionsRefused = counter(
      'gateway_connections_refused_total',
      'Connections closed at accept: connection_cap (edge.maxConnections) or outsider_cap (edge.maxOutsiderConnections).',
      ['reason'],
      KNOWN.connectionsRefused,
    );
    this.addressBudgetRefusals = counter(
      'gateway_address_budget_refusals_total',
      `Requests answered 429 and connections closed at accept because one client address was over its budget (D53, D59, limits.perAddress), by reason (${KNOWN.addressBudgetRefusals.join(', ')}); never by address.`,
      ['reason'],
      KNOWN.addressBudgetRefusals,
    );
    this.clientErrors = counter(
      'gateway_client_errors_total',
      `Requests the HTTP parser refused, and connections closed by a deadline before their first request (D25, D59), by kind (${KNOWN.clientErrors.join(', ')}).`,
      ['kind'],
      KNOWN.clientErrors,
    );
    this.auditWritable = new Gauge({
      name: 'gateway_audit_writable',
      help: '1 while audit lines can be written; 0 while audited requests answer 503 (D26).',
      registers,
    });
    this.auditWritable.set(1);
    this.auditWriteFailures = counter('gateway_audit_write_failures_total', 'Times the audit file stopped accepting lines (D26).');
    this.auditRefusals = counter('gateway_audit_refusals_total', 'Requests answered 503 because the audit trail could not be written (D26).');
    this.auditLinesDropped = counter(
      'gateway_audit_lines_dropped_total',
      'Audit lines dropped because the audit file failed for longer than its buffer lasts.',
    );
    this.logLinesDropped = new Counter({
      name: 'gateway_log_lines_dropped_total',
      help: 'Log lines dropped because the log sink was broken or too slow (D26).',
      registers,
      collect() {
        // The log destination keeps the count; a scrape copies it.
        this.reset();
        this.inc(sources.logLinesDropped?.() ?? 0);
      },
    });
    this.passwordHashBusy = counter('gateway_password_hash_busy_total', 'Logins answered 503 at once because the password-hash capacity was in use (D27).');
    this.connectorPoolInFlight = new Gauge({
      name: 'gateway_connector_pool_in_flight',
      help: 'Requests being sent to or answered by the connector.',
      registers,
      collect() {
        this.set(sources.connectorPool?.().inFlight ?? 0);
      },
    });
    this.connectorPoolQueued = new Gauge({
      name: 'gateway_connector_pool_queued',
      help: 'Requests waiting for a free connector connection.',
      registers,
      collect() {
        this.set(sources.connectorPool?.().queued ?? 0);
      },
    });
    this.connectorPoolSaturated = new Gauge({
      name: 'gateway_connector_pool_saturated',
      help: '1 while every connector connection is busy and requests queue for one (readiness reports it).',
      registers,
      collect() {
        this.set((sources.connectorPool?.().queued ?? 0) > 0 ? 1 : 0);
      },
    });
    this.idempotencyWaiters = new Gauge({
      name: 'gateway_idempotency_waiters',
      help: 'Card requests waiting for a concurrent duplicate to finish.',
      registers,
    });
    this.idempotencyWaitersRefused = counter(
      'gateway_idempotency_waiters_refused_total',
      'Duplicates answered 409 at once because cards.maxWaitersPerKey were already waiting.',
    );
    this.configReloads = counter(
      'gateway_config_reloads_total',
      'Configuration reloads (SIGHUP or a file change), by outcome.',
      ['outcome'],
      KNOWN.configReloads,
    );
    this.tlsCertificateExpiry = new Gauge({
      name: 'gateway_tls_certificate_expiry_timestamp_seconds',
      help: 'When each TLS certificate expires (Unix seconds), by listener: api (the API listener), connector_client (mutual TLS to the connector).',
      labelNames: ['listener'],
      registers,
    });
  }

  /**
   * The text exposition for `/metrics`. prom-client writes a NaN sample as `Nan` where the format
   * says `NaN`: the event-loop lag gauges are NaN when no delay was sampled since the last scrape
   * (two scrapes close together), and a strict parser refuses the whole scrape for it.
   */
  async exposition(): Promise<string> {
    return (await this.registry.metrics()).replace(NAN_SAMPLE, ' NaN');
  }

  /** Lets the log destination report its dropped lines at scrape time. */
  observeLogDrops(source: () => number): void {
    this.#sources.logLinesDropped = source;
  }

  /** Lets the connector client report its pool at scrape time. */
  observeConnectorPool(source: () => { inFlight: number; queued: number }): void {
    this.#sources.connectorPool = source;
  }
}
