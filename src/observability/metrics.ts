import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Every metric of one gateway instance, on its own registry so that several instances in one
 * process (tests, replicas) never share counters. Labels are route templates and fixed
 * outcome words: never a path with ids, a username or a token.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'method' | 'route' | 'status_code'>;
  readonly httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  readonly accessDenied: Counter<'reason'>;
  readonly logins: Counter<'outcome'>;
  readonly refreshes: Counter<'outcome'>;
  readonly logouts: Counter<'outcome'>;
  readonly rateLimited: Counter<'limiter'>;
  readonly reuseDetected: Counter;
  readonly cardsCreated: Counter;
  readonly cardReplays: Counter;
  readonly cardReveals: Counter;
  readonly connectorDuration: Histogram<'outcome'>;
  readonly connectorErrors: Counter<'kind'>;
  readonly storeUnavailable: Counter;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: 'gateway_http_requests_total',
      help: 'Requests answered by the public listener, by route template and status.',
      labelNames: ['method', 'route', 'status_code'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'gateway_http_request_duration_seconds',
      help: 'Time from request start to response end on the public listener.',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.accessDenied = new Counter({ name: 'gateway_access_denied_total', help: 'Requests refused by the edge: allowlist, plain HTTP, credential address ranges, permissions, inactive credentials.', labelNames: ['reason'], registers });
    this.logins = new Counter({ name: 'gateway_logins_total', help: 'Login attempts by outcome.', labelNames: ['outcome'], registers });
    this.refreshes = new Counter({ name: 'gateway_refreshes_total', help: 'Refresh attempts by outcome.', labelNames: ['outcome'], registers });
    this.logouts = new Counter({ name: 'gateway_logouts_total', help: 'Logout attempts by outcome.', labelNames: ['outcome'], registers });
    this.rateLimited = new Counter({ name: 'gateway_rate_limited_total', help: 'Requests refused with 429, by limiter.', labelNames: ['limiter'], registers });
    this.reuseDetected = new Counter({ name: 'gateway_refresh_reuse_detected_total', help: 'Refresh tokens presented after their grace; each revoked a family (D5).', registers });
    this.cardsCreated = new Counter({ name: 'gateway_cards_created_total', help: 'Cards created at the connector.', registers });
    this.cardReplays = new Counter({ name: 'gateway_card_replays_total', help: 'Card creations answered from the idempotency record.', registers });
    this.cardReveals = new Counter({ name: 'gateway_card_reveals_total', help: 'Responses that carried full card details (D18).', registers });
    this.connectorDuration = new Histogram({
      name: 'gateway_connector_request_duration_seconds',
      help: 'Time spent waiting for the processor-connector, by outcome.',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.connectorErrors = new Counter({ name: 'gateway_connector_errors_total', help: 'Failed forwards to the connector, by kind (refused, reset, timeout, status, invalid_answer).', labelNames: ['kind'], registers });
    this.storeUnavailable = new Counter({ name: 'gateway_store_unavailable_total', help: 'Requests answered 503 because the shared store did not answer (D23).', registers });
  }
}
