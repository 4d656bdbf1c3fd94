import type { FastifyInstance } from 'fastify';
import type { Clock } from '../foundation/clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { AuditSink } from '../observability/audit.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Outcomes } from '../observability/outcomes.js';
import { resolveClientOrigin } from './client-origin.js';
import { resolvedOrigin } from './request-budget.js';
import { sendError } from './error-handler.js';
import { errors } from '../foundation/errors.js';
import { MAX_URL_BYTES, urlCarriesToken } from './url-checks.js';
import { routeOf } from './request-context.js';

/**
 * The first hook of every request, before body parsing or anything that costs: the correlation
 * id, the client address (D10), the allowlist, HTTPS-only (D9), the Host header, the URL's
 * length (D25) and tokens in the URL (D12, D30), and the audit trail's health for routes that
 * must be audited (D26). Refusals that come before any credential is known are audited in
 * per-minute summaries (D25, D34).
 */
export function installEdgeGuards(
  app: FastifyInstance,
  deps: { live: LiveSettings; clock: Clock; audit: AuditSink; outcomes: Outcomes; metrics: GatewayMetrics },
): void {
  const { live, clock, audit, outcomes, metrics } = deps;
  app.decorateRequest('clientAddress', '');
  app.decorateRequest('principal', undefined);
  app.decorateRequest('routeFacts', undefined);
  // Set when close() starts: requests that arrive on kept-alive sockets while in-flight ones
  // drain get the 503 envelope (Fastify's own closing answer is not one) and Connection: close.
  let draining = false;
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  // Answers finished while draining close their socket: a kept-alive socket whose request was
  // in flight when close() began would otherwise hold the shutdown until its keep-alive timeout.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-correlation-id', request.id);
    const socket = request.raw.socket;
    const current = live.current;
    // Resolved already by the request budget (request-budget.ts) when the request came through a listener.
    const origin =
      resolvedOrigin(request.raw) ??
      resolveClientOrigin(socket.remoteAddress, (socket as { encrypted?: boolean }).encrypted === true, request.headers, current.trustedProxies);
    // An unknown address (a trusted proxy reporting `127.1`) is audited under the proxy's.
    const clientAddress = origin.address ?? socket.remoteAddress ?? '';
    request.clientAddress = clientAddress;

    if (draining) {
      reply.header('connection', 'close');
      sendError(reply, errors.shuttingDown(), clock);
      return;
    }
    const context = { correlationId: request.id, clientAddress };
    if (origin.address === undefined || !current.allowlist.contains(origin.address)) {
      outcomes.record({ name: 'edge.refused', reason: origin.address === undefined ? 'address_malformed' : 'address_not_allowed' }, context);
      reply.header('connection', 'close');
      sendError(reply, errors.addressNotAllowed(), clock);
      return;
    }
    if (!origin.https) {
      outcomes.record({ name: 'edge.refused', reason: 'https_required' }, context);
      // The body is never read: close the connection rather than drain it.
      reply.header('connection', 'close');
      sendError(reply, errors.httpsRequired(), clock);
      return;
    }
    if (request.headers.host === undefined && request.raw.httpVersionMinor >= 1) {
      reply.header('connection', 'close');
      sendError(reply, errors.malformedRequest('Host header is required'), clock);
      return;
    }
    if (request.url.length > MAX_URL_BYTES) {
      reply.header('connection', 'close');
      sendError(reply, errors.urlTooLong(), clock);
      return;
    }
    if (urlCarriesToken(request.url)) {
      outcomes.record({ name: 'edge.refused', reason: 'token_in_url' }, context);
      sendError(reply, errors.tokenInUrl(), clock);
      return;
    }
    const audited = routeOf(request).policy?.audited;
    if ((audited === true || (typeof audited === 'function' && audited(request))) && !audit.writable) {
      metrics.auditRefusals.inc();
      sendError(reply, errors.auditUnavailable(), clock);
      return;
    }
    done();
  });
}
