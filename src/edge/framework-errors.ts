import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../foundation/clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import { classifyPeer } from './client-origin.js';
import { sendError } from './error-handler.js';
import { errors } from '../foundation/errors.js';

/**
 * Fastify's `frameworkErrors`: a URL it cannot decode (`/%zz`, FST_ERR_BAD_URL) is answered
 * before routing, so no hook and no error handler runs, and Fastify's own body would leak its
 * code and message without an X-Correlation-Id (D20). This renders it as the envelope.
 *
 * The request here is Fastify's plain one, without the trusted-proxy view, so the edge checks
 * are made on the socket: a direct client outside the allowlist still gets 403 first (D10) and
 * a plain-HTTP one 403 "HTTPS is required" (D9). Behind a trusted proxy the client address is
 * not known here: the answer is the same 400 for everyone, which tells nothing about the routes.
 */
export function createFrameworkErrorHandler(deps: { live: LiveSettings; clock: Clock }) {
  const { live, clock } = deps;
  return function frameworkErrors(_error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    reply.header('x-correlation-id', request.id);
    reply.header('connection', 'close');
    const peer = classifyPeer(request.raw.socket?.remoteAddress, live.current);
    if (peer === 'outsider') {
      sendError(reply, errors.addressNotAllowed(), clock);
      return;
    }
    if (peer === 'client' && !(request.raw.socket as { encrypted?: boolean } | undefined)?.encrypted) {
      sendError(reply, errors.httpsRequired(), clock);
      return;
    }
    sendError(reply, errors.malformedRequest('Request URL is malformed'), clock);
  };
}
