import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from './metrics.js';

/**
 * One counter increment, one histogram observation and one log line per request. The route
 * label is the template (`/api/v1/issuing/cards`), or `unmatched` for 404s, so a scan of random
 * paths cannot blow up the label set. The log line carries no URL: a query string could hold
 * a token (D12), and bodies are never logged.
 */
export function installRequestMetrics(app: FastifyInstance, metrics: GatewayMetrics, options: { logRequests: boolean }): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const labels = { method: request.method, route, status_code: String(reply.statusCode) };
    metrics.httpRequests.inc(labels);
    const seconds = reply.elapsedTime / 1000;
    metrics.httpDuration.observe(labels, seconds);
    if (options.logRequests) {
      request.log.info({ method: request.method, route, statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, client: request.clientAddress }, 'request');
    }
    done();
  });
}
