import type { FastifyInstance } from 'fastify';
import type { LiveSettings } from '../config/live-settings.js';
import type { GatewayConfig } from '../config/load-config.js';
import { errors } from '../edge/errors.js';
import { BearerSecurity, errorResponses } from '../edge/schemas.js';
import type { AuditSink } from '../observability/audit.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { CardIssuance } from './card-issuance.js';
import { openCardSecrets } from './card-sealing.js';
import { CardQuerySchema, CardRequestSchema, CardResponseSchema, type CardQuery, type CardRequest, type CardResponse } from './card-schemas.js';
import { checkCardRequest } from './validate-card-request.js';

/**
 * POST /api/v1/issuing/cards (spec 4.4). The bearer guard and the route policy have already
 * authenticated and checked `cards:create` before the body is read; `cards:reveal` is checked
 * here too before the body, so a refused reveal never creates a card (D13).
 */
export function registerCardRoute(
  scope: FastifyInstance,
  deps: { config: GatewayConfig; live: LiveSettings; issuance: CardIssuance; audit: AuditSink; metrics: GatewayMetrics },
): void {
  const { live, issuance, audit, metrics, config } = deps;
  scope.post<{ Body: CardRequest; Querystring: CardQuery }>(
    '/api/v1/issuing/cards',
    {
      bodyLimit: config.cards.bodyLimitBytes,
      config: { policy: { permission: 'cards:create' } },
      schema: {
        summary: 'Create a virtual card (idempotent on requestId)',
        tags: ['cards'],
        security: BearerSecurity,
        querystring: CardQuerySchema,
        body: CardRequestSchema,
        response: { 201: CardResponseSchema, ...errorResponses(400, 401, 403, 409, 413, 415, 502, 503, 504) },
      },
      onRequest: (request, _reply, done) => {
        const reveal = (request.query as CardQuery).revealDetails === 'true';
        const credential = request.principal?.credential;
        if (reveal && credential && !credential.permissions.has('cards:reveal')) {
          metrics.accessDenied.inc({ reason: 'permission' });
          audit.record({ event: 'access.denied', correlationId: request.id, clientAddress: request.clientAddress, outcome: 'denied', credential: credential.id, reason: 'permission' });
          done(errors.forbidden('Permission cards:reveal is required for revealDetails=true'));
          return;
        }
        done();
      },
    },
    async (request, reply) => {
      const { credential } = request.principal!;
      const reveal = request.query.revealDetails === 'true';
      const { problems, effectiveLimit } = checkCardRequest(request.body, live.current.issuingAccounts.get(credential.issuingAccount));
      if (problems.length > 0) throw errors.validation(problems);

      const issued = await issuance.issue(reply, { issuingAccount: credential.issuingAccount, body: request.body, effectiveLimit, log: request.log });
      const { card } = issued.record;
      const base = { correlationId: request.id, clientAddress: request.clientAddress, credential: credential.id, requestId: request.body.requestId, cardId: card.cardId };
      if (issued.replayed) {
        metrics.cardReplays.inc();
        audit.record({ ...base, event: 'card.replayed', outcome: 'success' });
        reply.header('idempotent-replayed', 'true');
        if (issued.payloadMismatch) reply.header('idempotency-payload-mismatch', 'true');
      } else {
        audit.record({ ...base, event: 'card.created', outcome: 'success' });
      }

      let pan = card.maskedPan;
      let cvc = card.maskedCvc ?? '***';
      if (reveal) {
        const secrets = issued.fresh ?? openCardSecrets(issued.record.sealedSecrets, config.cards.encryptionKey, issued.recordKey);
        pan = secrets.pan;
        cvc = secrets.cvc;
        metrics.cardReveals.inc();
        audit.record({ ...base, event: 'card.revealed', outcome: 'success' });
      }
      const body: CardResponse = {
        cardId: card.cardId,
        pan,
        cvc,
        expMonth: card.expMonth,
        expYear: card.expYear,
        status: card.status as CardResponse['status'],
        requestedCardLimit: card.requestedCardLimit,
        cardLimit: card.cardLimit,
        currency: card.currency,
        createdAt: card.createdAt,
      };
      reply.header('cache-control', 'no-store');
      reply.code(201);
      return body;
    },
  );
}
