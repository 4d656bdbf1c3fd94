import { Type, type Static } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DeliveryAdmin, type DeliveryAdminDeps } from '../../events/delivery/delivery-admin.js';
import type { RequestContext } from '../../observability/outcomes.js';
import { sendError, toGatewayError } from '../error-handler.js';

/** An event id as event-ids.ts makes them: `evt_` and 26 Crockford base32 characters. */
const EVENT_ID = '^evt_[0-9A-HJKMNP-TV-Z]{26}$';
export const DELIVERY_LIST_LIMIT = { min: 1, max: 1000, default: 100 } as const;

const EndpointParams = Type.Object({ endpointId: Type.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
const DeliveryParams = Type.Object(
  { endpointId: Type.String({ minLength: 1, maxLength: 128 }), eventId: Type.String({ pattern: EVENT_ID }) },
  { additionalProperties: false },
);
const DeliveriesQuery = Type.Object(
  {
    state: Type.Union([Type.Literal('failed'), Type.Literal('pending')], { default: 'failed' }),
    limit: Type.Integer({ minimum: DELIVERY_LIST_LIMIT.min, maximum: DELIVERY_LIST_LIMIT.max, default: DELIVERY_LIST_LIMIT.default }),
  },
  { additionalProperties: false },
);
const Timestamp = Type.String({ format: 'date-time' });
const Delivery = Type.Object({
  eventId: Type.String(),
  state: Type.Union([Type.Literal('pending'), Type.Literal('failed')]),
  attempts: Type.Integer(),
  nextAttemptAt: Type.Optional(Timestamp),
  failedAt: Type.Optional(Timestamp),
  lastError: Type.Optional(Type.String()),
});
const Endpoints = Type.Object({
  endpoints: Type.Array(
    Type.Object({
      id: Type.String(),
      issuingAccount: Type.String(),
      host: Type.String(),
      stopped: Type.Boolean(),
      backlog: Type.Object({ pending: Type.Integer(), failed: Type.Integer(), oldestDueAt: Type.Optional(Timestamp) }),
    }),
  ),
});
const Deliveries = Type.Object({ endpointId: Type.String(), state: Type.String(), deliveries: Type.Array(Delivery) });
const Redelivery = Type.Object({ redelivered: Type.Integer(), endpointStopped: Type.Boolean() });

type EndpointParams = Static<typeof EndpointParams>;
type DeliveryParams = Static<typeof DeliveryParams>;
type DeliveriesQuery = Static<typeof DeliveriesQuery>;

/**
 * Validation in this scope: unknown parameters and members are refused rather than dropped (the
 * admin listener's default removes them), query values are read as numbers, and every problem
 * is reported.
 */
const validator = new Ajv({ allErrors: true, removeAdditional: false, coerceTypes: true, useDefaults: true, strict: false });

/** Who asked, as the audit line names it: the admin listener has no credential, only an address. */
const contextOf = (request: FastifyRequest): RequestContext => ({
  correlationId: request.id,
  clientAddress: request.ip,
  route: `${request.method} ${request.routeOptions.url ?? 'unmatched'}`,
});

/**
 * The webhook delivery routes of the admin listener (D65): the endpoints with their backlogs,
 * an endpoint's failed or pending deliveries, one delivery, and redelivery of one or of every
 * failed one (audited `event.redelivered`). Errors are the gateway's envelope, as on the API.
 */
export function registerEventAdminRoutes(admin: FastifyInstance, deps: DeliveryAdminDeps): void {
  const service = new DeliveryAdmin(deps);
  void admin.register(async (scope) => {
    scope.setValidatorCompiler(({ schema }) => validator.compile(schema));
    scope.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
      const mapped = toGatewayError(error);
      if (mapped.status >= 500 && mapped.code !== 'store_unavailable' && mapped.code !== 'audit_unavailable') {
        const cause = mapped === error ? mapped.cause : error;
        request.log.error(
          { correlationId: request.id, err: cause instanceof Error ? { type: cause.name, code: (cause as { code?: unknown }).code } : undefined },
          'admin request failed',
        );
      }
      return sendError(reply, mapped, deps.clock);
    });

    scope.get('/events/endpoints', { schema: { response: { 200: Endpoints } } }, async () => ({ endpoints: await service.endpoints() }));

    scope.get<{ Params: EndpointParams; Querystring: DeliveriesQuery }>(
      '/events/endpoints/:endpointId/deliveries',
      { schema: { params: EndpointParams, querystring: DeliveriesQuery, response: { 200: Deliveries } } },
      async (request) => {
        const { endpointId } = request.params;
        const { state, limit } = request.query;
        return { endpointId, state, deliveries: await service.deliveries(endpointId, state, limit) };
      },
    );

    scope.get<{ Params: DeliveryParams }>(
      '/events/endpoints/:endpointId/deliveries/:eventId',
      { schema: { params: DeliveryParams, response: { 200: Delivery } } },
      async (request) => service.delivery(request.params.endpointId, request.params.eventId),
    );

    scope.post<{ Params: DeliveryParams }>(
      '/events/endpoints/:endpointId/deliveries/:eventId/redeliver',
      { schema: { params: DeliveryParams, response: { 200: Redelivery } } },
      async (request) => service.redeliver(request.params.endpointId, request.params.eventId, contextOf(request)),
    );

    scope.post<{ Params: EndpointParams }>(
      '/events/endpoints/:endpointId/redeliver-failed',
      { schema: { params: EndpointParams, response: { 200: Redelivery } } },
      async (request) => service.redeliverFailed(request.params.endpointId, contextOf(request)),
    );
  });
}
