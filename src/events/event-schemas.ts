import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { CardStatusSchema } from '../foundation/card-status.js';
import { EVENT_ID_PATTERN } from '../foundation/event-ids.js';
import { EVENT_TYPES, type EventType } from '../foundation/event-types.js';
import { ISO_UTC_TIMESTAMP } from '../cards/card-schemas.js';

/**
 * The events as clients read them and receive them (D63): one schema per type, a union on
 * `type`. They document the reading routes and the webhooks in the OpenAPI description; the
 * answers themselves are the stored JSON, written once when the event was recorded.
 */

const EventCardSchema = Type.Object(
  {
    cardId: Type.String(),
    pan: Type.String({ description: 'Masked: the last four digits only.' }),
    cvc: Type.String({ description: 'Stars only.' }),
    expMonth: Type.Integer(),
    expYear: Type.Integer(),
    status: CardStatusSchema,
    requestedCardLimit: Type.Integer(),
    cardLimit: Type.Integer(),
    currency: Type.String(),
    createdAt: Type.String(),
    requestId: Type.Optional(Type.String()),
    metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { title: 'EventCard', description: 'The card as a client without revealDetails sees it.' },
);

const MerchantSchema = Type.Object(
  {
    name: Type.String(),
    categoryCode: Type.String({ pattern: '^[0-9]{4}$', description: 'ISO 18245 merchant category code.' }),
    country: Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2.' }),
  },
  { title: 'Merchant' },
);

const TransactionDataSchema = (declined: boolean) =>
  Type.Object({
    transactionId: Type.String(),
    cardId: Type.String(),
    amount: Type.Integer({ minimum: 0, description: "In the currency's minor units." }),
    currency: Type.String({ pattern: '^[A-Z]{3}$' }),
    merchant: MerchantSchema,
    occurredAt: Type.String({ description: 'When the processor saw it (RFC 3339).' }),
    ...(declined && { declineReason: Type.String() }),
  });

const DATA: Record<EventType, TSchema> = {
  'card.created': Type.Object({ card: EventCardSchema }),
  'card.status_changed': Type.Object({
    card: EventCardSchema,
    previousStatus: CardStatusSchema,
    status: CardStatusSchema,
    reason: Type.Optional(Type.String()),
    source: Type.Union([Type.Literal('api'), Type.Literal('processor')], { description: 'api: a client changed it; processor: the processor did.' }),
    credentialId: Type.Optional(Type.String({ description: 'The credential that changed it (source api).' })),
  }),
  'transaction.authorized': TransactionDataSchema(false),
  'transaction.declined': TransactionDataSchema(true),
  'transaction.cleared': TransactionDataSchema(false),
  'transaction.reversed': TransactionDataSchema(false),
};

/** `card.status_changed` -> `CardStatusChangedEvent`: the schema's title in the OpenAPI description. */
export const eventSchemaName = (type: EventType): string =>
  `${type
    .split(/[._]/)
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('')}Event`;

export const EVENT_SCHEMAS: Record<EventType, TSchema> = Object.fromEntries(
  EVENT_TYPES.map((type) => [
    type,
    Type.Object(
      {
        id: Type.String({ pattern: EVENT_ID_PATTERN, description: 'Unique; the webhook-id header of its deliveries.' }),
        type: Type.Literal(type),
        createdAt: Type.String({ description: 'When the gateway recorded it (RFC 3339, milliseconds, UTC).' }),
        issuingAccount: Type.String(),
        sequence: Type.Integer({
          minimum: 1,
          description: 'Grows with every event of the issuing account: of two events of one card, the higher is the later.',
        }),
        data: DATA[type],
      },
      { title: eventSchemaName(type) },
    ),
  ]),
) as unknown as Record<EventType, TSchema>;

export const EventSchema = Type.Union(
  EVENT_TYPES.map((type) => EVENT_SCHEMAS[type]),
  { title: 'Event', description: 'One event; `type` tells which data it carries.' },
);

export const EventPageSchema = Type.Object(
  {
    data: Type.Array(EventSchema, { description: 'Newest first.' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last.' }),
  },
  { title: 'EventPage' },
);

export const EVENT_LIST_LIMIT = { min: 1, max: 100, default: 20 } as const;

export const EventListQuerySchema = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: EVENT_LIST_LIMIT.min,
        maximum: EVENT_LIST_LIMIT.max,
        description: `Events per page, ${EVENT_LIST_LIMIT.min} to ${EVENT_LIST_LIMIT.max} (default ${EVENT_LIST_LIMIT.default}).`,
      }),
    ),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description: "The previous page's nextCursor, unchanged, with the same filters." })),
    type: Type.Optional(Type.Unsafe<EventType>({ type: 'string', enum: [...EVENT_TYPES], description: 'Only events of this type.' })),
    cardId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Only events of this card.' })),
    createdAfter: Type.Optional(Type.String({ pattern: ISO_UTC_TIMESTAMP, description: 'Only events recorded at or after this instant (ISO 8601 UTC).' })),
    createdBefore: Type.Optional(Type.String({ pattern: ISO_UTC_TIMESTAMP, description: 'Only events recorded at or before this instant (ISO 8601 UTC).' })),
  },
  { additionalProperties: false },
);
export type EventListQuery = Static<typeof EventListQuerySchema>;

export const EventIdParamsSchema = Type.Object({ eventId: Type.String({ description: "The event's id (`evt_...`)." }) }, { additionalProperties: false });
export type EventIdParams = Static<typeof EventIdParamsSchema>;
