import { Type, type Static } from '@sinclair/typebox';
import { CardStatusSchema } from '../foundation/card-status.js';

const UUID_SHAPED = '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$';
/** ISO 8601 in UTC with a `Z`; calendar validity is checked in validate-card-request.ts. */
export const ISO_UTC_TIMESTAMP = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$';

/** POST /api/v1/issuing/cards body (spec 2.3) with the bounds of D14. Unknown members: 400. */
export const CardRequestSchema = Type.Object(
  {
    requestId: Type.String({ pattern: UUID_SHAPED, description: 'UUID-shaped idempotency key, scoped to the issuing account (24 h).' }),
    cardLimit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Requested limit in minor units; a JSON integer.' }),
    currency: Type.String({ pattern: '^[A-Z]{3}$', description: 'ISO 4217 code enabled for the issuing account.' }),
    config: Type.Optional(
      Type.Object(
        {
          expiryDuration: Type.Optional(Type.Integer({ minimum: 1, maximum: 60, description: 'Months.' })),
          authorizationWindow: Type.Optional(
            Type.Object(
              { startDate: Type.String({ pattern: ISO_UTC_TIMESTAMP }), endDate: Type.String({ pattern: ISO_UTC_TIMESTAMP }) },
              { additionalProperties: false, description: 'startDate must be before endDate.' },
            ),
          ),
          tolerance: Type.Optional(Type.Object({ percentage: Type.Integer({ minimum: 0, maximum: 100 }) }, { additionalProperties: false })),
          cardType: Type.Optional(Type.String({ maxLength: 32 })),
          maxTransactions: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
          allowedCategories: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 100 })),
        },
        { additionalProperties: false },
      ),
    ),
    metadata: Type.Optional(
      Type.Record(Type.String({ maxLength: 40 }), Type.String({ maxLength: 500 }), {
        maxProperties: 50,
        // TypeBox's Record turns the key schema into patternProperties and drops its maxLength.
        propertyNames: { maxLength: 40 },
        description:
          'Free key-value strings: at most 50 members, keys up to 40 characters, values up to 500. Forwarded to the card processor: no secrets or cardholder data.',
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'CardRequest',
    examples: [
      {
        requestId: '0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b',
        cardLimit: 10000,
        currency: 'EUR',
        config: {
          expiryDuration: 12,
          authorizationWindow: { startDate: '2026-12-01T00:00:00Z', endDate: '2026-12-31T23:59:59Z' },
          tolerance: { percentage: 5 },
        },
        metadata: { card_name: 'Trip to Lisbon', cost_center: 'CC-9' },
      },
    ],
  },
);
export type CardRequest = Static<typeof CardRequestSchema>;

export const CardQuerySchema = Type.Object(
  { revealDetails: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'true: full PAN and CVC (needs cards:reveal).' })) },
  // D30: nothing else of the client's URL is accepted (and none of it ever goes upstream).
  { additionalProperties: false },
);
export type CardQuery = Static<typeof CardQuerySchema>;

/** The card record of spec 2.2. */
export const CardResponseSchema = Type.Object(
  {
    cardId: Type.String({ description: "The processor's id of the card." }),
    pan: Type.String({ description: 'Masked unless revealed: all but the last four digits are *.' }),
    cvc: Type.String({ description: 'Masked unless revealed.' }),
    expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
    expYear: Type.Integer(),
    status: CardStatusSchema,
    requestedCardLimit: Type.Integer({ description: 'The cardLimit of the request.' }),
    cardLimit: Type.Integer({ description: 'Effective limit: cardLimit + floor(cardLimit × tolerance percentage / 100).' }),
    currency: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { title: 'Card' },
);
export type CardResponse = Static<typeof CardResponseSchema>;

/** The card every OpenAPI example shows (creation, read, list). */
export const CARD_EXAMPLE: CardResponse = {
  cardId: 'card_9bee88cd3ba8d8d0016ecfa0',
  pan: '************5291',
  cvc: '***',
  expMonth: 11,
  expYear: 2027,
  status: 'active',
  requestedCardLimit: 10000,
  cardLimit: 10500,
  currency: 'EUR',
  createdAt: '2026-11-23T21:13:33.318Z',
};

/** The 201 examples of the OpenAPI description. */
export const CARD_EXAMPLES = {
  masked: { summary: 'Created (or replayed): PAN and CVC masked', value: CARD_EXAMPLE },
  revealed: { summary: 'With revealDetails=true: full PAN and CVC', value: { ...CARD_EXAMPLE, pan: '4000001462815291', cvc: '106' } },
};
