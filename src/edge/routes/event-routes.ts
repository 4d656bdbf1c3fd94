import type { FastifyInstance, FastifyReply } from 'fastify';
import { EVENT_READ_NEEDS } from '../../cards/card-access.js';
import {
  EventIdParamsSchema,
  EventListQuerySchema,
  EventPageSchema,
  EventSchema,
  type EventIdParams,
  type EventListQuery,
} from '../../events/event-schemas.js';
import type { EventReading } from '../../events/read-events.js';
import { errors } from '../../foundation/errors.js';
import { numericLimit } from './card-read-routes.js';
import { BEARER_CODES, BearerSecurity, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';

export const EVENTS_PATH = '/api/v1/issuing/events';

const EXAMPLE_EVENT = {
  id: 'evt_01JDQ4S2X8N3V5K7M9P1R3T5W7',
  type: 'card.status_changed',
  createdAt: '2026-11-29T09:00:00.123Z',
  issuingAccount: 'acct-sbx-eu-001',
  sequence: 42,
  data: {
    card: {
      cardId: 'card_7f3a9c2e',
      pan: '************4242',
      cvc: '***',
      expMonth: 11,
      expYear: 2029,
      status: 'inactive',
      requestedCardLimit: 50000,
      cardLimit: 50000,
      currency: 'EUR',
      createdAt: '2026-11-29T08:55:00.000Z',
      requestId: '0b8f3c8e-5d1a-4f7e-9a7c-2f1e3d4c5b6a',
      metadata: { card_name: 'Trip to Lisbon' },
    },
    previousStatus: 'active',
    status: 'inactive',
    reason: 'suspected fraud',
    source: 'processor',
  },
};

/** Stored events are answered as they were recorded: JSON text, not re-serialized. */
function sendJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.header('cache-control', 'no-store').type('application/json; charset=utf-8').send(json);
}

/**
 * GET /api/v1/issuing/events and GET /api/v1/issuing/events/{eventId} (D66): `events:read`,
 * counted against the credential's read limit like card reads; another account's event is the
 * same 404 as an unknown one.
 */
export function registerEventRoutes(scope: FastifyInstance, reading: EventReading): void {
  scope.get<{ Querystring: EventListQuery }>(
    EVENTS_PATH,
    {
      preValidation: numericLimit,
      config: { policy: { permission: () => EVENT_READ_NEEDS, limits: ['cardRead'] } },
      schema: {
        operationId: 'listEvents',
        summary: "List the issuing account's events, newest first",
        description:
          "Needs `events:read`. The events of the caller's issuing account kept for the retention period (7 days by default), newest first, exactly as they were delivered to webhook endpoints. Filters: `type`, `cardId`, `createdAfter` and `createdBefore` (inclusive). Page with `nextCursor` and the same filters. A page may hold fewer events than `limit` (even none) with a `nextCursor` when a filter matches few of many events: continue while `nextCursor` is not null. Counts against the credential's read limit (with card reads). Safe to retry.",
        tags: ['events'],
        security: BearerSecurity,
        querystring: EventListQuerySchema,
        ...documentedResponses(EventPageSchema, {
          success: {
            status: 200,
            description: 'One page of events.',
            headers: { 'Cache-Control': true },
            examples: { page: { summary: 'One event, last page', value: { data: [EXAMPLE_EVENT], nextCursor: null } } },
          },
          errors: [...TRANSPORT_CODES, 'validation_failed', 'invalid_cursor', ...BEARER_CODES, 'rate_limited', 'internal_error', 'store_unavailable'],
          rateLimited: true,
          afterLimiter: ['validation_failed', 'invalid_cursor'],
          errorExamples: { permission_denied: errors.permissionDenied('Permission events:read is required') },
        }),
      },
    },
    async (request, reply) => sendJson(reply, (await reading.list(request.principal!.credential.issuingAccount, request.query)).json),
  );

  scope.get<{ Params: EventIdParams }>(
    `${EVENTS_PATH}/:eventId`,
    {
      config: { policy: { permission: () => EVENT_READ_NEEDS, limits: ['cardRead'] } },
      schema: {
        operationId: 'getEvent',
        summary: 'Read one event',
        description:
          "Needs `events:read`. One event of the caller's issuing account, as it was delivered. An unknown id, a malformed one, one past the retention period and another account's event all answer the same 404 `event_not_found`. Counts against the credential's read limit. Safe to retry.",
        tags: ['events'],
        security: BearerSecurity,
        params: EventIdParamsSchema,
        ...documentedResponses(EventSchema, {
          success: {
            status: 200,
            description: 'The event.',
            headers: { 'Cache-Control': true },
            examples: { event: { summary: 'A processor-side freeze', value: EXAMPLE_EVENT } },
          },
          errors: [...TRANSPORT_CODES, ...BEARER_CODES, 'event_not_found', 'rate_limited', 'internal_error', 'store_unavailable'],
          rateLimited: true,
          afterLimiter: ['event_not_found'],
        }),
      },
    },
    async (request, reply) => sendJson(reply, await reading.get(request.principal!.credential.issuingAccount, request.params.eventId)),
  );
}
