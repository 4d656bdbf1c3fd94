import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from './metrics.js';

/**
 * One counter increment, one histogram observation and (at most) one log line per request. The route
 * label is the template (`/api/v1/issuing/cards`), or `unmatched` for 404s, so a scan of random
 * paths cannot blow up the label set. The log line carries no URL: a query string could hold
 * a token (D12), and bodies are never logged.
 */
export function installRequestMetrics(app: FastifyInstance, metrics: GatewayMetrics, options: { logRequests: boolean }): void {
  // Label children resolved once per (method, route, status): prom-client would otherwise hash
  // the label object on every observation.
  const children = new Map<string, { count: { inc(): void }; duration: { observe(value: number): void } }>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const key = `${request.method} ${route} ${reply.statusCode}`;
    let child = children.get(key);
    if (!child) {
      const labels = { method: request.method, route, status_code: String(reply.statusCode) };
      child = { count: metrics.httpRequests.labels(labels), duration: metrics.httpDuration.labels(labels) };
      children.set(key, child);
    }
    child.count.inc();
    child.duration.observe(reply.elapsedTime / 1000);
    if (options.logRequests) {
      // Successes are already in the audit trail (auth and card events) and the metrics: their
      // line is debug. Refusals and failures stay visible at info. One line costs ~7 % of a
      // card creation's CPU (bench profile).
      const line = { method: request.method, route, statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, client: request.clientAddress };
      if (reply.statusCode >= 400) request.log.info(line, 'request');
      else request.log.debug(line, 'request');
    }
    done();
  });
}
