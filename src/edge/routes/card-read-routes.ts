import type { FastifyInstance, FastifyRequest } from 'fastify';
import { cardPermissions, NOT_CREATOR } from '../../cards/card-access.js';
import {
  CardIdParamsSchema,
  CardListQuerySchema,
  CardPageSchema,
  CardRecordSchema,
  PAGE_EXAMPLES,
  RECORD_EXAMPLES,
  type CardIdParams,
  type CardListQuery,
} from '../../cards/card-lifecycle-schemas.js';
import { CardQuerySchema, type CardQuery } from '../../cards/card-schemas.js';
import type { ListCards } from '../../cards/list-cards.js';
import type { ReadCard } from '../../cards/read-card.js';
import { errors } from '../../foundation/errors.js';
import { BEARER_CODES, BearerSecurity, CARD_CONNECTOR_CODES, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';
import { requestContext } from '../request-context.js';

export const CARD_PATH = '/api/v1/issuing/cards/:cardId';
const LIST_PATH = '/api/v1/issuing/cards';

/** A query value written as plain digits becomes a number for the schema; anything else (`1.5`, `1e2`, ` 5`) stays text and is refused. */
const PLAIN_DIGITS = /^[0-9]{1,15}$/;
export function numericLimit(request: FastifyRequest, _reply: unknown, done: () => void): void {
  const query = request.query as Record<string, unknown>;
  const limit = query['limit'];
  if (typeof limit === 'string' && PLAIN_DIGITS.test(limit)) query['limit'] = Number(limit);
  done();
}

const revealing = (request: FastifyRequest): boolean => (request.query as CardQuery).revealDetails === 'true';

/**
 * GET /api/v1/issuing/cards/{cardId} (D43) and GET /api/v1/issuing/cards (D44). Permissions
 * are checked before anything else, then the per-credential read limit (D48, reads of one card
 * and lists counted together); the use cases (cards/read-card.ts, cards/list-cards.ts) do the rest.
 */
export function registerCardReadRoutes(scope: FastifyInstance, deps: { readCard: ReadCard; listCards: ListCards }): void {
  scope.get<{ Params: CardIdParams; Querystring: CardQuery }>(
    CARD_PATH,
    {
      config: { policy: { permission: (request) => cardPermissions('read', revealing(request)), limits: ['cardRead'], audited: revealing } },
      schema: {
        operationId: 'getCard',
        summary: 'Read one card',
        description:
          "Needs `cards:read`. The card as it is now (its current status), masked. With `revealDetails=true` the full PAN and CVC, which needs `cards:reveal` too and is allowed only to the credential that created the card, while the gateway still keeps the record of its creation (24 hours); every reveal is audited. A card of another issuing account, an unknown id and a malformed id all answer the same 404 `card_not_found`. Counts against the credential's read limit (with listing). Safe to retry.",
        tags: ['cards'],
        security: BearerSecurity,
        params: CardIdParamsSchema,
        querystring: CardQuerySchema,
        ...documentedResponses(CardRecordSchema, {
          success: { status: 200, description: 'The card.', headers: { 'Cache-Control': true }, examples: RECORD_EXAMPLES },
          errors: [
            ...TRANSPORT_CODES,
            'validation_failed',
            ...BEARER_CODES,
            'card_not_found',
            'rate_limited',
            'internal_error',
            ...CARD_CONNECTOR_CODES,
            'store_unavailable',
            'audit_unavailable',
          ],
          rateLimited: true,
          afterLimiter: ['permission_denied', 'card_not_found', ...CARD_CONNECTOR_CODES],
          errorExamples: { permission_denied: errors.permissionDenied(NOT_CREATOR) },
        }),
      },
    },
    async (request, reply) => {
      const card = await deps.readCard({
        credential: request.principal!.credential,
        cardId: request.params.cardId,
        reveal: revealing(request),
        ...requestContext(request),
      });
      reply.header('cache-control', 'no-store');
      return card;
    },
  );

  scope.get<{ Querystring: CardListQuery }>(
    LIST_PATH,
    {
      preValidation: numericLimit,
      config: { policy: { permission: () => cardPermissions('list', false), limits: ['cardRead'] } },
      schema: {
        operationId: 'listCards',
        summary: "List the issuing account's cards, newest first",
        description:
          "Needs `cards:read`. One page of the caller's issuing account's cards, newest first, every card masked (`revealDetails` is refused here: read one card to reveal it). Filters: `status`, `createdAfter` and `createdBefore` (ISO 8601 UTC, inclusive, createdAfter not later than createdBefore). To page, pass the answer's `nextCursor` as `cursor` with the same filters; a cursor that was altered, comes from another account or from other filters is 400 `invalid_cursor`. Cards created while paging may appear on the first page of a new listing, never twice in one. Counts against the credential's read limit (with reading one card). Safe to retry.",
        tags: ['cards'],
        security: BearerSecurity,
        querystring: CardListQuerySchema,
        ...documentedResponses(CardPageSchema, {
          success: { status: 200, description: 'One page of cards.', headers: { 'Cache-Control': true }, examples: PAGE_EXAMPLES },
          errors: [
            ...TRANSPORT_CODES,
            'validation_failed',
            'invalid_cursor',
            ...BEARER_CODES,
            'rate_limited',
            'internal_error',
            ...CARD_CONNECTOR_CODES,
            'store_unavailable',
          ],
          rateLimited: true,
          afterLimiter: ['validation_failed', 'invalid_cursor', ...CARD_CONNECTOR_CODES],
          errorExamples: {
            permission_denied: errors.permissionDenied('Permission cards:read is required'),
            validation_failed: errors.validation([{ path: 'query.limit', message: 'must be <= 100' }]),
          },
        }),
      },
    },
    async (request, reply) => {
      const page = await deps.listCards({
        credential: request.principal!.credential,
        query: request.query,
        ...requestContext(request),
      });
      reply.header('cache-control', 'no-store');
      return page;
    },
  );
}
