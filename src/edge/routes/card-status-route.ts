import type { FastifyInstance } from 'fastify';
import { cardPermissions } from '../../cards/card-access.js';
import type { ChangeCardStatus } from '../../cards/change-card-status.js';
import {
  CardIdParamsSchema,
  CardStatusAnswerSchema,
  CardStatusChangeSchema,
  STATUS_EXAMPLES,
  type CardIdParams,
  type CardStatusChange,
} from '../../cards/card-lifecycle-schemas.js';
import { errors } from '../../foundation/errors.js';
import { BEARER_CODES, BearerSecurity, BODY_CODES, CARD_CONNECTOR_CODES, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';
import { CARD_PATH } from './card-read-routes.js';
import { requestContext } from '../request-context.js';

/**
 * PATCH /api/v1/issuing/cards/{cardId} (D45): freeze, unfreeze, cancel. `cards:update` and the
 * per-credential status-change limit (D48) are checked before the body is read; the use case
 * (cards/change-card-status.ts) does the rest, in one connector call (D57), and decides how much
 * of the card the answer shows (D56). Audited, so it pauses while the audit trail cannot be
 * written (D26).
 */
export function registerCardStatusRoute(scope: FastifyInstance, changeCardStatus: ChangeCardStatus, settings: { bodyLimitBytes: number }): void {
  scope.patch<{ Params: CardIdParams; Body: CardStatusChange }>(
    CARD_PATH,
    {
      bodyLimit: settings.bodyLimitBytes,
      config: { policy: { permission: () => cardPermissions('update', false), limits: ['cardStatus'], audited: true } },
      schema: {
        operationId: 'changeCardStatus',
        summary: "Change a card's status: freeze, unfreeze, cancel",
        description:
          "Needs `cards:update`. `inactive` freezes an active card, `active` unfreezes an inactive one, `canceled` ends an active or inactive card for good. Asking for the status the card already has answers 200 and changes nothing (`previousStatus` equals `status`), so a retry is always safe; any change of a canceled card is 409 `card_canceled`, final. The body has `status` and optionally `reason` (1 to 200 characters, kept in the audit trail; a reason holding a card number is 400 `validation_failed`), nothing else. The answer is the whole card, masked, with `previousStatus`, when the credential also holds `cards:read`; with `cards:update` alone it is `{ cardId, status, previousStatus }`. Another account's card, an unknown id and a malformed id are 404 `card_not_found`. Every request that reaches the card is audited, whether it changed the status or not. Counts against the credential's status-change limit.",
        tags: ['cards'],
        security: BearerSecurity,
        params: CardIdParamsSchema,
        body: CardStatusChangeSchema,
        ...documentedResponses(CardStatusAnswerSchema, {
          success: {
            status: 200,
            description: 'The card with its status now and before the request: the whole card with cards:read, the summary without it.',
            headers: { 'Cache-Control': true },
            examples: STATUS_EXAMPLES,
          },
          errors: [
            ...TRANSPORT_CODES,
            ...BODY_CODES,
            ...BEARER_CODES,
            'card_not_found',
            'card_canceled',
            'rate_limited',
            'internal_error',
            ...CARD_CONNECTOR_CODES,
            'store_unavailable',
            'audit_unavailable',
          ],
          rateLimited: true,
          afterLimiter: ['validation_failed', 'card_not_found', 'card_canceled', ...CARD_CONNECTOR_CODES],
          errorExamples: {
            permission_denied: errors.permissionDenied('Permission cards:update is required'),
            validation_failed: errors.validation([{ path: 'reason', message: 'looks like a card number' }]),
          },
        }),
      },
    },
    async (request, reply) => {
      const answer = await changeCardStatus({
        credential: request.principal!.credential,
        cardId: request.params.cardId,
        change: request.body,
        ...requestContext(request),
      });
      reply.header('cache-control', 'no-store');
      return answer;
    },
  );
}
