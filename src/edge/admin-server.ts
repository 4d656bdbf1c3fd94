import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../observability/metrics.js';

/**
 * A named readiness check (D22): resolves when the dependency can serve, rejects otherwise. An
 * error with a `state` (`saturated`) names how it cannot serve; else it is `unavailable`. An
 * error with a `reason` says why (D55: the store's `out_of_memory: ...`), shown under `reasons`;
 * any other error's message stays out of the answer.
 */
export interface ReadinessProbe {
  name: string;
  check(): Promise<void>;
}

/**
 * The admin listener (D22), plain HTTP on loopback by default: Prometheus metrics, liveness,
 * readiness and the OpenAPI description. It carries no client traffic and no secrets.
 */
export function buildAdminServer(deps: {
  metrics: GatewayMetrics;
  probes: ReadinessProbe[];
  logger: Logger;
  openapi: () => unknown;
  draining?: () => boolean;
}): FastifyInstance {
  const admin = Fastify({
    loggerInstance: deps.logger.child({ listener: 'admin' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: true,
  });
  admin.get('/metrics', async (_request, reply) => {
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.exposition();
  });
  admin.get('/healthz', async () => ({ status: 'ok' }));
  admin.get('/readyz', async (_request, reply) => {
    const results = await Promise.all(
      deps.probes.map(async (probe) => {
        try {
          await probe.check();
          return { name: probe.name, state: 'ok', reason: undefined };
        } catch (error) {
          const { state, reason } = error as { state?: unknown; reason?: unknown };
          return { name: probe.name, state: typeof state === 'string' ? state : 'unavailable', reason: typeof reason === 'string' ? reason : undefined };
        }
      }),
    );
    const checks = Object.fromEntries(results.map(({ name, state }) => [name, state]));
    const reasons = Object.fromEntries(results.flatMap(({ name, reason }) => (reason === undefined ? [] : [[name, reason]])));
    const why = Object.keys(reasons).length > 0 ? { reasons } : {};
    // D38: from SIGTERM on, not ready whatever the checks say, so load balancers stop sending.
    if (deps.draining?.()) {
      reply.code(503);
      return { status: 'draining', checks, ...why };
    }
    const ready = results.every(({ state }) => state === 'ok');
    reply.code(ready ? 200 : 503);
    return { status: ready ? 'ready' : 'not ready', checks, ...why };
  });
  admin.get('/openapi.json', async () => deps.openapi());
  return admin as unknown as FastifyInstance;
}
