import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { AuthRateLimits } from './auth/auth-rate-limits.js';
import { CredentialRevocations } from './auth/credential-revocations.js';
import { PasswordHashGate } from './auth/password-hash-gate.js';
import { SessionService } from './auth/session-service.js';
import { TokenService } from './auth/token-service.js';
import { buildInfo as processBuildInfo } from './build-info.js';
import type { CardPorts } from './cards/card-ports.js';
import { CardSealer } from './cards/card-sealing.js';
import { CardCursorSealer } from './cards/card-cursor.js';
import { cardStatusChanging } from './cards/change-card-status.js';
import { cardCreation } from './cards/create-card.js';
import { cardListing } from './cards/list-cards.js';
import { PendingRecords } from './cards/pending-records.js';
import { cardReading } from './cards/read-card.js';
import { LiveSettings } from './config/live-settings.js';
import type { GatewayConfig } from './config/config-types.js';
import { createConnectorClient } from './connector/connector-client.js';
import type { ConnectorClient } from './connector/connector-port.js';
import { createBearerGuard } from './edge/bearer-guard.js';
import { AddressBudgets } from './edge/address-budgets.js';
import { installEdgeGuards } from './edge/edge-guards.js';
import { installErrorHandler } from './edge/error-handler.js';
import { createFrameworkErrorHandler } from './edge/framework-errors.js';
import type { DeadlineTimer } from './edge/first-request-deadline.js';
import { createClientErrorHandler, publicServers, type HardeningDeps, type PublicServers } from './edge/listener-hardening.js';
import { installNotFound } from './edge/not-found.js';
import { installRateLimits, permissionHook } from './edge/route-policy.js';
import { holdWithTimer, type RefusalHold } from './edge/request-budget.js';
import { registerCardRoute } from './edge/routes/card-route.js';
import { registerCardReadRoutes } from './edge/routes/card-read-routes.js';
import { registerCardStatusRoute } from './edge/routes/card-status-route.js';
import { registerEventRoutes } from './edge/routes/event-routes.js';
import { registerJwksRoute } from './edge/routes/jwks-route.js';
import { registerLoginRoute } from './edge/routes/login-route.js';
import { registerLogoutRoute } from './edge/routes/logout-route.js';
import { registerRefreshRoute } from './edge/routes/refresh-route.js';
import { ErrorEnvelopeSchema } from './edge/openapi/envelope-schema.js';
import { openApiOptions } from './edge/openapi/options.js';
import { installStrictJson } from './edge/strict-json-parser.js';
import { buildEvents } from './events/install-events.js';
import type { Clock } from './foundation/clock.js';
import { buildAdminServer, type ReadinessProbe } from './edge/admin-server.js';
import { buildConnectorListener } from './edge/connector-listener.js';
import type { AuditSink } from './observability/audit.js';
import { GatewayMetrics } from './observability/metrics.js';
import { OutcomeRecorder, type RequestContext } from './observability/outcomes.js';
import { countUnroutedAnswer, installRequestMetrics } from './edge/request-metrics.js';
import { instrumentStore } from './observability/store-timing.js';
import { observeStore } from './observability/store-observer.js';
import type { GatewayStore } from './store/store-types.js';
import './edge/request-context.js';

export interface GatewayDependencies {
  config: GatewayConfig;
  store: GatewayStore;
  clock: Clock;
  logger: Logger;
  audit: AuditSink;
  /** Defaults to a fresh registry per instance; tests and replicas never share counters. */
  metrics?: GatewayMetrics;
  /** The connector port; by default an undici client for `config.connector`, closed with the admin server. */
  connector?: ConnectorClient;
  /** The password hash gate; by default one built from `config.passwordHashing`. */
  hashGate?: PasswordHashGate;
  /** How a repeated per-address refusal is held (D53); by default a timer. Tests hold it themselves. */
  holdRefusal?: RefusalHold;
  /** The first-request deadline's timer (D59); by default a real one. Tests fire it themselves. */
  firstRequestTimer?: DeadlineTimer;
  /** Lets a test add routes to the public or the protected scope before the app is ready. */
  extend?: { public?: (scope: FastifyInstance) => void; protected?: (scope: FastifyInstance) => void };
}

export interface Gateway {
  /** The public API: TLS when listening (D9), never listens by itself. */
  readonly app: FastifyInstance;
  /** Metrics, health, readiness, OpenAPI (D22). */
  readonly admin: FastifyInstance;
  /** Where the connector posts processor-side events (D64), when `listeners.connector` is set; never listens by itself. */
  readonly connectorListener: FastifyInstance | undefined;
  readonly metrics: GatewayMetrics;
  readonly live: LiveSettings;
  readonly tokens: TokenService;
  readonly outcomes: OutcomeRecorder;
  /** The hardened public listeners (D25): the TLS one is `app.server`; `plain` builds the D9 one. */
  readonly servers: PublicServers;
  /**
   * Applies the reloadable parts of a new, already validated config (D22) at once; the returned
   * promise settles once credentials deactivated or given a new secret have had their sessions
   * ended in the shared store too (D41). `context` names the reload in the audit trail.
   */
  reload(config: GatewayConfig, context?: RequestContext): Promise<void>;
  /** Writes the audit summaries of refusals now, rather than when their minute ends (tests, shutdown). */
  flushAudit(): void;
  /** From now on `/readyz` answers 503: the first step of a shutdown behind a load balancer (D38). */
  markDraining(): void;
}

/**
 * How long a shutdown waits for card records still being written. Each write has the store's
 * deadline (twice the command timeout with replica acknowledgements); this only bounds a store
 * that breaks that promise.
 */
const recordDrainGuardMs = (store: GatewayConfig['store']): number => (store.kind === 'redis' ? 2 * store.commandTimeoutMs : 0) + 1000;

/**
 * Builds the gateway from a config and injected ports; never listens. The use cases
 * (sessions, cards) are built here once, on the ports (store, connector, outcome recorder), and
 * the routes only translate HTTP to them.
 */
export async function buildGateway(deps: GatewayDependencies): Promise<Gateway> {
  const { config, clock, logger, audit } = deps;
  const metrics = deps.metrics ?? new GatewayMetrics();
  const buildInfo = processBuildInfo();
  metrics.buildInfo.set({ version: buildInfo.version, commit: buildInfo.commit }, 1);
  // Parsed (and checked against their keys) by the loader; one series per certificate (D51).
  metrics.tlsCertificateExpiry.set({ listener: 'api' }, config.tls.certificateExpiresAt);
  const connectorClientExpiry = config.connector.tls?.certificateExpiresAt;
  if (connectorClientExpiry !== undefined) metrics.tlsCertificateExpiry.set({ listener: 'connector_client' }, connectorClientExpiry);

  // Ports.
  const store = instrumentStore(deps.store, metrics);
  const connector = deps.connector ?? createConnectorClient(config.connector);
  metrics.observeConnectorPool(() => connector.poolLoad());
  const outcomes = new OutcomeRecorder(metrics, audit, logger);
  const live = new LiveSettings(config);
  const tokens = await TokenService.create(config.tokens, clock);
  // D41: read before the first request; a store that does not answer yet is retried in the background.
  const revocations = new CredentialRevocations({ store: store.notBefore, clock, outcomes, logger });
  await revocations.start(config.credentials);

  // Use cases.
  const sessions = new SessionService({
    store,
    clock,
    tokens,
    live,
    settings: config,
    outcomes,
    revocations,
    hashGate: deps.hashGate ?? new PasswordHashGate(config.passwordHashing.maxConcurrent, config.passwordHashing.maxConcurrentPerAddress),
  });
  // The card use cases, each built once on the same ports.
  const pendingRecords = new PendingRecords();
  const cursors = new CardCursorSealer(config.cards.encryptionKey, config.cards.previousEncryptionKeys);
  const events = buildEvents({ config, store: store.events, clock, logger, cursors });
  const cards: CardPorts = {
    store,
    clock,
    connector,
    outcomes,
    sealer: new CardSealer(config.cards.encryptionKey, config.cards.previousEncryptionKeys),
    cursors,
    live,
    pendingRecords,
    events: events.cards,
    settings: config,
  };
  const createCard = cardCreation(cards);
  const readCard = cardReading(cards);
  const listCards = cardListing(cards);
  const changeCardStatus = cardStatusChanging(cards);
  const limits = new AuthRateLimits(store, config.rateLimits, clock);

  // HTTP.
  const hardening: HardeningDeps = {
    limits: config.edge,
    clock,
    ranges: () => live.current,
    events: {
      connectionOpened: () => metrics.connectionsOpen.inc(),
      connectionClosed: () => metrics.connectionsOpen.dec(),
      connectionRefused: (reason) => metrics.connectionsRefused.inc({ reason }),
      clientError: (kind) => metrics.clientErrors.inc({ kind }),
      budgetRefused: (reason) => metrics.addressBudgetRefusals.inc({ reason }),
      budgetAnswered: (method) => countUnroutedAnswer(metrics, method, 429),
    },
    budgets: new AddressBudgets(() => config.limits.perAddress, clock),
    perAddress: () => config.limits.perAddress,
    holdRefusal: deps.holdRefusal ?? holdWithTimer,
    logger,
    ...(deps.firstRequestTimer && { firstRequestTimer: deps.firstRequestTimer }),
  };
  const servers = publicServers(hardening);
  const app = Fastify({
    // The TLS listener is built here (deadlines, connection budgets, AEAD-only TLS: D25, D33).
    serverFactory: servers.tlsFactory(config.tls),
    clientErrorHandler: createClientErrorHandler(hardening),
    loggerInstance: logger,
    // No child logger per request (its creation, with redaction, cost every request): lines
    // that concern a request carry `correlationId` themselves.
    childLoggerFactory: (parent) => parent,
    // Fastify's own per-request lines would log the URL; request-metrics.ts writes one line instead.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    // Never take a client's request id: the correlation id is ours (spec 5.10).
    requestIdHeader: false,
    // The client address and scheme are resolved by the edge guard (client-origin.ts), strictly.
    trustProxy: false,
    // A URL Fastify cannot decode is answered before any hook: render it as the envelope too.
    frameworkErrors: createFrameworkErrorHandler({ live, clock }),
    bodyLimit: config.cards.bodyLimitBytes,
    // A card id of any length reaches its route, which answers an impossible one like an unknown
    // one (404 card_not_found, D43); the URL as a whole is capped at 8 KiB by the edge (D25).
    routerOptions: { maxParamLength: 8192 },
    forceCloseConnections: 'idle',
    // edge-guards.ts answers requests that arrive while draining, with the envelope.
    return503OnClosing: false,
    ajv: {
      // Unknown members are errors (D14), "100" is not 100, and every problem is reported
      // (the answer lists at most 20 of them, D29; the strict reader bounds how many there can
      // be, edge/strict-json.ts).
      customOptions: { allErrors: true, removeAdditional: false, coerceTypes: false, useDefaults: false },
    },
    // Fastify's own formatter writes every validation error into one message string that
    // nobody reads (the error handler builds the answer from the errors, at most 21 of them).
    schemaErrorFormatter: () => new Error('Request validation failed'),
  }) as unknown as FastifyInstance;
  installStrictJson(app);
  app.addSchema(ErrorEnvelopeSchema);
  // OpenAPI 3.1, decorated from the routes' declarations (edge/openapi/); the admin listener serves it.
  await app.register(swagger, openApiOptions(buildInfo.version));
  installErrorHandler(app, clock, metrics);
  installNotFound(app, clock);
  installEdgeGuards(app, { live, clock, audit, outcomes, metrics });
  installRequestMetrics(app, metrics);
  installRateLimits(app, { limits, outcomes });

  registerLoginRoute(app, sessions);
  registerJwksRoute(app, tokens);
  deps.extend?.public?.(app);
  // Everything else needs a bearer token (D12): one encapsulated scope, one guard.
  await app.register(async (scope) => {
    scope.addHook('onRequest', createBearerGuard({ tokens, live, outcomes, revocations }));
    scope.addHook('onRequest', permissionHook({ outcomes }));
    registerRefreshRoute(scope, sessions);
    registerLogoutRoute(scope, sessions);
    registerCardRoute(scope, createCard, config.cards);
    registerCardReadRoutes(scope, { readCard, listCards });
    registerCardStatusRoute(scope, changeCardStatus, config.cards);
    registerEventRoutes(scope, events.reading);
    deps.extend?.protected?.(scope);
  });

  // Store metrics (up, topology, master changes) and one log line per change of the store's state or master.
  const unobserveStore = observeStore(deps.store, { registry: metrics.registry, logger });
  // Fastify runs this once in-flight requests are answered; the store is closed after the app,
  // so the card records answered ahead of their write reach it first.
  app.addHook('onClose', async () => {
    const pending = pendingRecords.size;
    if (!(await pendingRecords.drain(recordDrainGuardMs(config.store)))) {
      logger.warn(
        { pending, left: pendingRecords.size },
        'shutdown: card idempotency records not written in time; a retry of their requestId gets the same card from the connector',
      );
    }
    unobserveStore();
    revocations.close();
  });

  let draining = false;
  const probes: ReadinessProbe[] = [
    { name: 'store', check: () => store.ping() },
    { name: 'connector', check: () => connector.health() },
    {
      name: 'audit',
      check: async () => {
        if (!audit.writable) throw new Error('audit trail cannot be written');
      },
    },
  ];
  const connectorListener =
    config.listeners.connector &&
    buildConnectorListener({
      config,
      record: (draft) => events.recordFromConnector(draft),
      logger,
      metrics: { connectorEvents: () => undefined },
      clock,
      knownAccounts: () => live.current.issuingAccounts,
    });
  const admin = buildAdminServer({ metrics, probes, logger, openapi: () => app.swagger(), draining: () => draining });
  if (!deps.connector) admin.addHook('onClose', async () => connector.close());

  return {
    app,
    admin,
    connectorListener,
    metrics,
    live,
    tokens,
    outcomes,
    servers,
    reload: (next, context = { correlationId: randomUUID(), clientAddress: 'local' }) => {
      const previous = live.current.credentials;
      live.apply(next);
      events.reload(next);
      return revocations.applied(previous, next.credentials, context);
    },
    flushAudit: () => audit.flushDenials(),
    markDraining: () => {
      draining = true;
    },
  };
}
