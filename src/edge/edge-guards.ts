import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { AuditSink } from '../observability/audit.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { normaliseAddress } from './address-ranges.js';
import { sendError } from './error-handler.js';
import { errors } from './errors.js';

/** A token-bearing query parameter, or a JWT anywhere in the URL (D12: refused, never used). */
const TOKEN_IN_URL = /[?&](access_token|accessToken|token|id_token|idToken|refresh_token|refreshToken)=|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\./;

/**
 * The first hooks of every request, before routing decisions, body parsing or anything that
 * costs: the correlation id, the client address, the allowlist (D10) and HTTPS-only (D9).
 */
export function installEdgeGuards(app: FastifyInstance, deps: { live: LiveSettings; clock: Clock; audit: AuditSink; metrics: GatewayMetrics }): void {
  const { live, clock, audit, metrics } = deps;
  app.decorateRequest('clientAddress', '');
  app.decorateRequest('principal', undefined);
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
    // request.ip already applied the trusted-proxy rule; normalise once so that the
    // allowlist, the limiters and the audit all see one spelling of the address.
    const clientAddress = normaliseAddress(request.ip) ?? request.ip;
    request.clientAddress = clientAddress;

    if (draining) {
      reply.header('connection', 'close');
      sendError(reply, errors.shuttingDown(), clock);
      return;
    }
    if (!live.current.allowlist.contains(clientAddress)) {
      metrics.accessDenied.inc({ reason: 'allowlist' });
      audit.record({ event: 'access.denied', correlationId: request.id, clientAddress, outcome: 'denied', reason: 'allowlist' });
      reply.header('connection', 'close');
      sendError(reply, errors.addressNotAllowed(), clock);
      return;
    }
    // request.protocol believes X-Forwarded-Proto only from a trusted proxy (trustProxy fn).
    if (request.protocol !== 'https') {
      metrics.accessDenied.inc({ reason: 'plain_http' });
      // The body is never read: close the connection rather than drain it.
      reply.header('connection', 'close');
      sendError(reply, errors.httpsRequired(), clock);
      return;
    }
    if (TOKEN_IN_URL.test(request.url)) {
      metrics.accessDenied.inc({ reason: 'token_in_url' });
      sendError(reply, errors.authenticationFailed('Tokens are not accepted in the URL'), clock);
      return;
    }
    done();
  });
}

/** Fastify's trustProxy as a function of the live settings, so a reload can change proxies. */
export function trustProxyFromLive(live: LiveSettings): (address: string, hop: number) => boolean {
  return (address) => live.current.trustedProxies.contains(address);
}
