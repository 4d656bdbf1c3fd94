import { Type, type Static } from '@sinclair/typebox';
import { Ajv, type ErrorObject } from 'ajv';
import { CardStatusSchema, type CardStatus } from '../foundation/card-status.js';

/**
 * The processor-connector contract (docs/connector-contract.md), written once: the gateway's
 * client and the sandbox connector both build on these schemas, so the two sides cannot drift.
 */

/**
 * One path segment, every reserved character encoded. Dots too: encodeURIComponent leaves them,
 * and a server or proxy that resolves dot segments would turn the id `..` into another resource.
 */
function pathSegment(value: string): string {
  return encodeURIComponent(value).replaceAll('.', '%2E');
}

export const CONNECTOR_PATHS = {
  createCard: '/v1/cards',
  listCards: '/v1/cards',
  /** `GET /v1/cards/{cardId}?issuingAccount=` (D43). */
  card: (cardId: string): string => `/v1/cards/${pathSegment(cardId)}`,
  /** `POST /v1/cards/{cardId}/status` (D45). */
  cardStatus: (cardId: string): string => `/v1/cards/${pathSegment(cardId)}/status`,
  health: '/health',
} as const;

/** Request headers of the contract (lower-case, as Node reads them). Nothing else is sent. */
export const CONNECTOR_HEADERS = {
  idempotencyKey: 'idempotency-key',
  correlationId: 'x-correlation-id',
  gatewaySecret: 'x-gateway-secret',
} as const;

/** The connector's idempotency key: one card per key, ever (D17). */
export const connectorIdempotencyKey = (issuingAccount: string, requestId: string): string => `${issuingAccount}:${requestId}`;

/** `POST /v1/cards` body. `cardLimit` is the effective limit, tolerance applied (D15). */
export const ConnectorCardRequestSchema = Type.Object({
  requestId: Type.String({ minLength: 1, maxLength: 64 }),
  issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
  requestedCardLimit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  cardLimit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  config: Type.Optional(
    Type.Object({ expiryDuration: Type.Optional(Type.Integer({ minimum: 1, maximum: 60, description: 'Months.' })) }, { additionalProperties: true }),
  ),
  metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
});
export type ConnectorCardRequest = Static<typeof ConnectorCardRequestSchema>;

/** The longest card id of the contract. */
export const MAX_CARD_ID_LENGTH = 128;

/** The card the connector answers with (201 created, 200 its own replay of the key): PAN and CVC in full. */
export const ConnectorCardSchema = Type.Object({
  cardId: Type.String({ minLength: 1, maxLength: MAX_CARD_ID_LENGTH }),
  pan: Type.String({ pattern: '^[0-9]{12,19}$' }),
  cvc: Type.String({ pattern: '^[0-9]{3,4}$' }),
  expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
  expYear: Type.Integer({ minimum: 2000, maximum: 2199 }),
  status: CardStatusSchema,
  cardLimit: Type.Integer({ minimum: 1 }),
  currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  createdAt: Type.String({ minLength: 20, maxLength: 40, pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$' }),
});
export type ConnectorCard = Static<typeof ConnectorCardSchema>;

const ajv = new Ajv({ allErrors: false, strict: false });
export const isConnectorCardRequest = ajv.compile<ConnectorCardRequest>(ConnectorCardRequestSchema);
const isConnectorCard = ajv.compile<ConnectorCard>(ConnectorCardSchema);

/** One line for a contract violation, as the sandbox answers it: `cardLimit must be >= 1`. */
export function describeContractError(errors: readonly ErrorObject[] | null | undefined): string {
  const first = errors?.[0];
  if (!first) return 'body does not match the connector contract';
  const field = first.instancePath.replace(/^\//, '').replaceAll('/', '.') || 'body';
  const extra = (first.params as { additionalProperty?: unknown }).additionalProperty;
  if (first.keyword === 'additionalProperties' && typeof extra === 'string') return `${field} must not have the member ${extra}`;
  return `${field} ${first.message ?? 'is invalid'}`;
}

/**
 * Parses and checks a connector answer body; undefined when it is not a valid card record, or
 * not the card that was asked for (D19: such an answer is a 502, never passed on). Without
 * `expected` (the connector's replay of an earlier request, D31) only the shape is checked.
 */
export function parseConnectorCard(text: string, expected: { cardLimit: number; currency: string } | undefined): ConnectorCard | undefined {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isConnectorCard(data)) return undefined;
  if (expected && (data.cardLimit !== expected.cardLimit || data.currency !== expected.currency)) return undefined;
  return data;
}

/**
 * The card record of the lifecycle calls (D43-D45): the creation answer's members plus the
 * account, the creating requestId, the requested limit and the metadata. PAN and CVC in full.
 */
export const ConnectorCardRecordSchema = Type.Intersect([
  ConnectorCardSchema,
  Type.Object({
    issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
    requestId: Type.String({ minLength: 1, maxLength: 64 }),
    requestedCardLimit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  }),
]);
export type ConnectorCardRecord = Static<typeof ConnectorCardRecordSchema>;

/** Bounds of `GET /v1/cards`: `limit` 1 to 100 (20 when absent), a cursor of at most 512 characters. */
export const CONNECTOR_LIST_BOUNDS = { minLimit: 1, maxLimit: 100, defaultLimit: 20, maxCursorLength: 512 } as const;

/** `GET /v1/cards` answer: newest first; the cursor is the connector's own, opaque to the gateway. */
export interface ConnectorCardPage {
  data: ConnectorCardRecord[];
  nextCursor: string | null;
}

/** The page's schema: never more records than the largest limit, a bounded cursor. */
export const ConnectorCardPageSchema = Type.Object({
  data: Type.Array(ConnectorCardRecordSchema, { maxItems: CONNECTOR_LIST_BOUNDS.maxLimit }),
  nextCursor: Type.Union([Type.String({ minLength: 1, maxLength: CONNECTOR_LIST_BOUNDS.maxCursorLength }), Type.Null()]),
});

/** The `code` of the 409 a status change of a canceled card answers (D45). */
export const CONNECTOR_CARD_CANCELED = 'card_canceled';

/** An ISO 8601 UTC instant as `createdAfter`/`createdBefore` carry it (fraction optional, `Z` required). */
export const UTC_INSTANT_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$';

/** Query of `GET /v1/cards`; `createdAfter`/`createdBefore` are ISO 8601 UTC instants. */
export interface ConnectorListQuery {
  issuingAccount: string;
  limit: number;
  cursor?: string;
  status?: CardStatus;
  createdAfter?: string;
  createdBefore?: string;
}

/**
 * The answer of `POST /v1/cards/{cardId}/status` (D57): the card after the call, the status it
 * had just before this call changed it (`previousStatus`) and whether this call changed it
 * (`changed`: false when the card already had the status asked for). A connector makes the change
 * and reads `previousStatus` in one atomic step, so of two concurrent calls asking for the same
 * status exactly one answers `changed: true`.
 */
export const ConnectorStatusAnswerSchema = Type.Intersect([
  ConnectorCardRecordSchema,
  Type.Object({ previousStatus: CardStatusSchema, changed: Type.Boolean() }),
]);
export type ConnectorStatusAnswer = Static<typeof ConnectorStatusAnswerSchema>;

/** Body of `POST /v1/cards/{cardId}/status`. */
export interface ConnectorStatusChange {
  issuingAccount: string;
  status: CardStatus;
  reason?: string;
}

/** The status change body's schema: those three members and nothing else. */
export const ConnectorStatusChangeSchema = Type.Object(
  {
    issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
    status: CardStatusSchema,
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);
