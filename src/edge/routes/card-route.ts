import type { FastifyInstance } from 'fastify';
import { cardPermissions, REVEAL_NEED } from '../../cards/card-access.js';
import { CARD_EXAMPLES, CardQuerySchema, CardRequestSchema, CardResponseSchema, type CardQuery, type CardRequest } from '../../cards/card-schemas.js';
import type { CreateCard } from '../../cards/create-card.js';
import { errors } from '../../foundation/errors.js';
import { BEARER_CODES, BearerSecurity, BODY_CODES, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';
import { requestContext } from '../request-context.js';

/**
 * POST /api/v1/issuing/cards (spec 4.4). `cards:create`, and `cards:reveal` when
 * `revealDetails=true`, are checked before the body is read, so a refused reveal never creates
 * a card (D13).
 */
export function registerCardRoute(scope: FastifyInstance, createCard: CreateCard, settings: { bodyLimitBytes: number }): void {
  scope.post<{ Body: CardRequest; Querystring: CardQuery }>(
    '/api/v1/issuing/cards',
    {
      bodyLimit: settings.bodyLimitBytes,
      config: {
        policy: {
          permission: (request) => cardPermissions('create', (request.query as CardQuery).revealDetails === 'true'),
          audited: true,
        },
      },
      schema: {
        operationId: 'createCard',
        summary: 'Create a virtual card (idempotent on requestId)',
        description:
          'Needs the permission `cards:create` (and `cards:reveal` with `revealDetails=true`, checked before anything is created). `requestId` is the idempotency key for 24 hours: the same requestId answers the same card (201 with `Idempotent-Replayed: true`) and never creates a second one. Retry only with the same requestId and payload, after no answer, 409, 502, 503 or 504 (honouring `Retry-After`); every other 4xx is final. Only the credential that created a card may reveal it.',
        tags: ['cards'],
        security: BearerSecurity,
        querystring: CardQuerySchema,
        body: CardRequestSchema,
        ...documentedResponses(CardResponseSchema, {
          success: {
            status: 201,
            description:
              'The card: created now, created by an earlier attempt under the same requestId (a retry after a timeout), or replayed (`Idempotent-Replayed: true`).',
            headers: { 'Cache-Control': true, 'Idempotent-Replayed': false, 'Idempotency-Payload-Mismatch': false },
            examples: CARD_EXAMPLES,
          },
          links: {
            getCard: {
              operationId: 'getCard',
              parameters: { cardId: '$response.body#/cardId' },
              description: 'Read the card as it is now (its status may have changed since: a replay answers the card as created).',
            },
            changeCardStatus: {
              operationId: 'changeCardStatus',
              parameters: { cardId: '$response.body#/cardId' },
              description: 'Freeze, unfreeze or cancel the card.',
            },
          },
          errors: [
            ...TRANSPORT_CODES,
            ...BODY_CODES,
            ...BEARER_CODES,
            'idempotency_in_progress',
            'internal_error',
            'record_unreadable',
            'connector_unavailable',
            'connector_invalid_answer',
            'store_unavailable',
            'audit_unavailable',
            'connector_timeout',
          ],
          errorExamples: { permission_denied: errors.permissionDenied(REVEAL_NEED.refusal) },
        }),
      },
    },
    async (request, reply) => {
      const result = await createCard({
        credential: request.principal!.credential,
        body: request.body,
        reveal: request.query.revealDetails === 'true',
        ...requestContext(request),
      });
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      if (result.payloadMismatch) reply.header('idempotency-payload-mismatch', 'true');
      reply.header('cache-control', 'no-store');
      reply.code(201);
      return result.card;
    },
  );
}
