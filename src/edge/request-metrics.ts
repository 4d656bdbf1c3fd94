import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { GatewayMetrics } from '../observability/metrics.js';
import { routeOf } from './request-context.js';

/**
 * The route label of answers written before routing: the per-address 429s (D53), which must cost
 * no routing work, so their route is not looked up.
 */
export const UNROUTED = 'unrouted';

/** Counts an answer written in front of Fastify (D62: every 429 is in gateway_http_requests_total). */
export function countUnroutedAnswer(metrics: GatewayMetrics, method: string, status: number): void {
  metrics.httpRequests.inc({ method, route: UNROUTED, status_code: String(status) });
}

/** The route template of requests Fastify answers without a route of their own (a 405 on a known path). */
const knownRoutes = new WeakMap<FastifyRequest, string>();

/** Labels `request` with `template`, the route its path belongs to though its method does not (not-found.ts). */
export function labelRoute(request: FastifyRequest, template: string): void {
  knownRoutes.set(request, template);
}

/**
 * One counter increment, one histogram observation and, at debug level, one log line per request. The route
 * label is the template (`/api/v1/issuing/cards`; a 405 too, from its path), or `unmatched` for 404s, so a scan of random
 * paths cannot blow up the label set. The log line carries no URL: a query string could hold
 * a token (D12), and bodies are never logged.
 */
export function installRequestMetrics(app: FastifyInstance, metrics: GatewayMetrics): void {
  // Label children resolved once per (method, route, status): prom-client would otherwise hash
  // the label object on every observation.
  const children = new Map<string, { count: { inc(): void }; duration: { observe(value: number): void } }>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = routeOf(request).url ?? knownRoutes.get(request) ?? 'unmatched';
    const key = `${request.method} ${route} ${reply.statusCode}`;
    let child = children.get(key);
    if (!child) {
      const labels = { method: request.method, route, status_code: String(reply.statusCode) };
      child = { count: metrics.httpRequests.labels(labels), duration: metrics.httpDuration.labels(labels) };
      children.set(key, child);
    }
    child.count.inc();
    child.duration.observe(reply.elapsedTime / 1000);
    // One line per request at debug only. Refusals are in the audit trail and the metrics. An
    // internal error (a bug) is logged with its stack by the error handler; a store outage once
    // as the store goes down and once as it returns; a failed card forward is counted and
    // audited (card.failed). So a flood or an outage never turns into a log line per request.
    if (request.log.level === 'debug' || request.log.level === 'trace') {
      request.log.debug(
        {
          correlationId: request.id,
          method: request.method,
          route,
          statusCode: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 10) / 10,
          client: request.clientAddress,
        },
        'request',
      );
    }
    done();
  });
}
