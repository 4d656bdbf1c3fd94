import { Type, type Static } from '@sinclair/typebox';

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
        description: 'Free key-value strings: at most 50 members, keys up to 40 characters, values up to 500.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CardRequest = Static<typeof CardRequestSchema>;

export const CardQuerySchema = Type.Object(
  { revealDetails: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'true: full PAN and CVC (needs cards:reveal).' })) },
  { additionalProperties: true },
);
export type CardQuery = Static<typeof CardQuerySchema>;

/** The card record of spec 2.2. */
export const CardResponseSchema = Type.Object({
  cardId: Type.String(),
  pan: Type.String({ description: 'Masked unless revealed: all but the last four digits are *.' }),
  cvc: Type.String({ description: 'Masked unless revealed.' }),
  expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
  expYear: Type.Integer(),
  status: Type.Union([Type.Literal('active'), Type.Literal('canceled'), Type.Literal('inactive')]),
  requestedCardLimit: Type.Integer(),
  cardLimit: Type.Integer({ description: 'Effective limit after tolerance (D15).' }),
  currency: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
});
export type CardResponse = Static<typeof CardResponseSchema>;
