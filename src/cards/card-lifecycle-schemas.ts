import { Type, type Static } from '@sinclair/typebox';
import { CARD_STATUSES, type CardStatus } from '../foundation/card-status.js';
import { CARD_EXAMPLE, CardResponseSchema, ISO_UTC_TIMESTAMP, type CardResponse } from './card-schemas.js';

/**
 * The schemas of reading, listing and changing cards (D43-D45): they validate the requests and
 * document the operations. Query values arrive as text; `limit` is turned into a number only
 * when it is written as plain digits (card-read-routes.ts), so `1.5` or `1e2` stay refused.
 */

/** A status as a plain enum: one precise problem ("must be one of ...") for a wrong value. */
const StatusEnum = (description: string) => Type.Unsafe<CardStatus>({ type: 'string', enum: [...CARD_STATUSES], description });

/** `{cardId}`: any text; an id that cannot be a card's is answered like an unknown one (404 card_not_found). */
export const CardIdParamsSchema = Type.Object(
  { cardId: Type.String({ description: "The card's id, as its creation answered it." }) },
  { additionalProperties: false },
);
export type CardIdParams = Static<typeof CardIdParamsSchema>;

export const LIST_LIMIT = { min: 1, max: 100, default: 20 } as const;

export const CardListQuerySchema = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: LIST_LIMIT.min,
        maximum: LIST_LIMIT.max,
        description: `Cards per page, ${LIST_LIMIT.min} to ${LIST_LIMIT.max} (default ${LIST_LIMIT.default}).`,
      }),
    ),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        description: "The previous page's nextCursor, unchanged, with the same filters. It is only valid for this issuing account and these filters.",
      }),
    ),
    status: Type.Optional(StatusEnum('Only cards with this status.')),
    createdAfter: Type.Optional(
      Type.String({
        pattern: ISO_UTC_TIMESTAMP,
        description: 'Only cards created at or after this instant (ISO 8601 UTC, with Z; milliseconds at most count).',
      }),
    ),
    createdBefore: Type.Optional(
      Type.String({ pattern: ISO_UTC_TIMESTAMP, description: 'Only cards created at or before this instant (ISO 8601 UTC); not earlier than createdAfter.' }),
    ),
  },
  // D30, D44: nothing else; revealDetails in particular (a list is always masked).
  { additionalProperties: false },
);
export type CardListQuery = Static<typeof CardListQuerySchema>;

export const CardStatusChangeSchema = Type.Object(
  {
    status: StatusEnum('The status wanted: inactive freezes, active unfreezes, canceled ends the card for good.'),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Why, in 1 to 200 characters; kept in the audit trail. No card data.' })),
  },
  {
    additionalProperties: false,
    title: 'CardStatusChange',
    examples: [{ status: 'inactive', reason: 'Card details shared by mistake' }],
  },
);
export type CardStatusChange = Static<typeof CardStatusChangeSchema>;

/** A card as reading, listing and status changes answer it: the record of creation plus its requestId and metadata. */
export const CardRecordSchema = Type.Object(
  {
    ...CardResponseSchema.properties,
    requestId: Type.String({ description: 'The requestId of the creation that made the card.' }),
    metadata: Type.Record(Type.String(), Type.String(), { description: "The creation's metadata ({} when it had none)." }),
  },
  { title: 'CardRecord' },
);
export type CardRecord = Static<typeof CardRecordSchema>;

const PREVIOUS_STATUS = 'The status the card had just before this request: equal to `status` when the request changed nothing.';

/**
 * What a status change answers a credential that also holds `cards:read` (D56): the card as it is
 * now, masked, and the status it had before this request.
 */
export const CardStatusChangedSchema = Type.Object(
  { ...CardRecordSchema.properties, previousStatus: StatusEnum(PREVIOUS_STATUS) },
  { title: 'CardStatusChanged' },
);
export type CardStatusChanged = Static<typeof CardStatusChangedSchema>;

/** What a status change answers a credential with `cards:update` alone (D56): nothing it may not read. */
export const CardStatusSummarySchema = Type.Object(
  {
    cardId: Type.String({ description: "The card's id." }),
    status: StatusEnum('The status the card has now.'),
    previousStatus: StatusEnum(PREVIOUS_STATUS),
  },
  { title: 'CardStatusSummary', additionalProperties: false },
);
export type CardStatusSummary = Static<typeof CardStatusSummarySchema>;

/** A status change's answer: the whole masked card with `cards:read`, the summary without it (D56). */
export const CardStatusAnswerSchema = Type.Union([CardStatusChangedSchema, CardStatusSummarySchema], {
  title: 'CardStatusAnswer',
  description:
    'The whole card (masked) with `previousStatus` when the credential also holds `cards:read`; otherwise only `cardId`, `status` and `previousStatus`.',
});
export type CardStatusAnswer = Static<typeof CardStatusAnswerSchema>;

export const CardPageSchema = Type.Object(
  {
    data: Type.Array(CardRecordSchema, { description: 'Newest first; every card masked.' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last page.' }),
  },
  { title: 'CardPage' },
);
export type CardPage = Static<typeof CardPageSchema>;

const RECORD_EXAMPLE: CardRecord = {
  ...CARD_EXAMPLE,
  requestId: '0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b',
  metadata: { card_name: 'Trip to Lisbon' },
} satisfies CardResponse & { requestId: string; metadata: Record<string, string> };

export const RECORD_EXAMPLES = {
  masked: { summary: 'PAN and CVC masked', value: RECORD_EXAMPLE },
  revealed: { summary: 'With revealDetails=true, by the credential that created it', value: { ...RECORD_EXAMPLE, pan: '4000001462815291', cvc: '106' } },
};
export const STATUS_EXAMPLES = {
  frozen: {
    summary: 'Frozen (status inactive), answered to a credential that also holds cards:read',
    value: { ...RECORD_EXAMPLE, status: 'inactive', previousStatus: 'active' } satisfies CardStatusChanged,
  },
  summary: {
    summary: 'Frozen, answered to a credential with cards:update alone',
    value: { cardId: RECORD_EXAMPLE.cardId, status: 'inactive', previousStatus: 'active' } satisfies CardStatusSummary,
  },
  unchanged: {
    summary: 'Already frozen: nothing changed',
    value: { cardId: RECORD_EXAMPLE.cardId, status: 'inactive', previousStatus: 'inactive' } satisfies CardStatusSummary,
  },
};
export const PAGE_EXAMPLES = {
  page: { summary: 'A page with more to come', value: { data: [RECORD_EXAMPLE], nextCursor: 'c1.card-1.oJ3f2kR8u0aZbXcD.Q2x1c3Rlcg' } },
  last: { summary: 'The last page', value: { data: [], nextCursor: null } },
};
