import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { AuthRateLimits } from './auth/auth-rate-limits.js';
import type { AuthContext } from './auth/auth-context.js';
import { createBearerGuard } from './auth/bearer-guard.js';
import { registerJwksRoute } from './auth/jwks-route.js';
import { registerLoginRoute } from './auth/login-route.js';
import { registerLogoutRoute } from './auth/logout-route.js';
import { createDummyHash } from './auth/password-hash.js';
import { registerRefreshRoute } from './auth/refresh-route.js';
import { TokenService } from './auth/token-service.js';
import { CardIssuance } from './cards/card-issuance.js';
import { registerCardRoute } from './cards/card-route.js';
import type { Clock } from './clock.js';
import { LiveSettings } from './config/live-settings.js';
import type { GatewayConfig } from './config/load-config.js';
import { connectorHealthProbe, registerConnectorForwarding } from './connector/connector-client.js';
import { installEdgeGuards, trustProxyFromLive } from './edge/edge-guards.js';
import { installErrorHandler } from './edge/error-handler.js';
import { createFrameworkErrorHandler } from './edge/framework-errors.js';
import { installNotFound } from './edge/not-found.js';
import { ErrorEnvelopeSchema } from './edge/schemas.js';
import { buildAdminServer, type ReadinessProbe } from './observability/admin-server.js';
import type { AuditSink } from './observability/audit.js';
import { GatewayMetrics } from './observability/metrics.js';
import { installRequestMetrics } from './observability/request-metrics.js';
import type { GatewayStore } from './store/store-types.js';
import './request-context.js';

export interface GatewayDependencies {
  config: GatewayConfig;
  store: GatewayStore;
  clock: Clock;
  logger: Logger;
  audit: AuditSink;
  /** Defaults to a fresh registry per instance; tests and replicas never share counters. */
  metrics?: GatewayMetrics;
  /** One info line per request (default true). The benchmark measures the cost of it. */
  logRequests?: boolean;
  /** Lets a test add routes to the public or the protected scope before the app is ready. */
  extend?: { public?: (scope: FastifyInstance) => void; protected?: (scope: FastifyInstance) => void };
}

export interface Gateway {
  /** The public API: TLS when listening (D9), never listens by itself. */
  readonly app: FastifyInstance;
  /** Metrics, health, readiness, OpenAPI (D22). */
  readonly admin: FastifyInstance;
  readonly metrics: GatewayMetrics;
  readonly live: LiveSettings;
  readonly tokens: TokenService;
  /** Applies the reloadable parts of a new, already validated config (D22). */
  reload(config: GatewayConfig): void;
}

/** Builds the gateway from a config and injected dependencies; never listens (style.md). */
export async function buildGateway(deps: GatewayDependencies): Promise<Gateway> {
  const { config, store, clock, logger, audit } = deps;
  const metrics = deps.metrics ?? new GatewayMetrics();
  const live = new LiveSettings(config);
  const tokens = await TokenService.create(config.tokens, clock);

  const app = Fastify({
    https: { cert: config.tls.cert, key: config.tls.key, minVersion: 'TLSv1.2' },
    loggerInstance: logger,
    // Fastify's own per-request lines would log the URL; request-metrics.ts writes one line instead.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    // Never take a client's request id: the correlation id is ours (spec 5.10).
    requestIdHeader: false,
    trustProxy: trustProxyFromLive(live),
    // A URL Fastify cannot decode is answered before any hook: render it as the envelope too.
    frameworkErrors: createFrameworkErrorHandler({ live, clock }),
    bodyLimit: config.cards.bodyLimitBytes,
    forceCloseConnections: 'idle',
    // edge-guards.ts answers requests that arrive while draining, with the envelope.
    return503OnClosing: false,
    // Bounds a client that trickles its request (slowloris); the connector has its own timeout.
    requestTimeout: 30_000,
    ajv: {
      // Unknown members are errors (D14), "100" is not 100, and every problem is reported.
      customOptions: { allErrors: true, removeAdditional: false, coerceTypes: false, useDefaults: false },
    },
  }) as unknown as FastifyInstance;

  // Bodies are JSON only (D14: 415 otherwise); Fastify would also take text/plain.
  app.removeContentTypeParser('text/plain');
  app.addSchema(ErrorEnvelopeSchema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Card issuing gateway', version: '1.0.0', description: `Environment: ${config.environment}. See docs/ and the interface specification.` },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
    },
  });
  installErrorHandler(app, clock, metrics);
  installNotFound(app, clock);
  installEdgeGuards(app, { live, clock, audit, metrics });
  installRequestMetrics(app, metrics, { logRequests: deps.logRequests ?? true });

  const auth: AuthContext = {
    settings: config,
    live,
    store,
    clock,
    audit,
    metrics,
    tokens,
    limits: new AuthRateLimits(store, config.rateLimits, clock, metrics),
    dummyHash: await createDummyHash(),
  };
  registerLoginRoute(app, auth);
  registerJwksRoute(app, tokens);
  deps.extend?.public?.(app);

  // Everything else needs a bearer token (D12): one encapsulated scope, one guard.
  await app.register(async (scope) => {
    scope.addHook('onRequest', createBearerGuard({ tokens, live, audit, metrics }));
    registerRefreshRoute(scope, auth);
    registerLogoutRoute(scope, auth);
    await registerConnectorForwarding(scope, config.connector);
    const issuance = new CardIssuance({ store, clock, metrics, connector: config.connector, cards: config.cards });
    registerCardRoute(scope, { config, live, issuance, audit, metrics });
    deps.extend?.protected?.(scope);
  });

  const connectorProbe = connectorHealthProbe(config.connector);
  const probes: ReadinessProbe[] = [{ name: 'store', check: () => store.ping() }, connectorProbe];
  const admin = buildAdminServer({ metrics, probes, logger, openapi: () => app.swagger() });
  admin.addHook('onClose', async () => connectorProbe.close());

  return {
    app,
    admin,
    metrics,
    live,
    tokens,
    reload: (next) => live.apply(next),
  };
}
