import { createHash } from 'node:crypto';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { containsCardNumber } from '../foundation/card-number-detector.js';
import { CARD_STATUSES, type CardStatus } from '../foundation/card-status.js';
import { TRANSACTION_EVENT_TYPES, type EventDataByType, type EventSource, type TransactionEventType } from '../foundation/event-types.js';
import { ConnectorCardSchema, MAX_CARD_ID_LENGTH, UTC_INSTANT_PATTERN } from './connector-contract.js';
import { maskedCardRecord } from './masked-card-record.js';

/**
 * Events from the connector (D63, D64; docs/connector-contract.md, "Events from the connector"),
 * written once for both sides: the gateway's connector listener checks a body against these
 * schemas and turns it into the recorder's draft; the sandbox connector builds its bodies from
 * the same types.
 */

export const CONNECTOR_EVENTS_PATH = '/v1/events';
/** The header a connector-held secret travels in (lower-case, as Node reads it). */
export const CONNECTOR_SECRET_HEADER = 'x-connector-secret';

/** The types a connector may send: processor-side status changes and the transactions. `card.created` is the gateway's own. */
export const CONNECTOR_EVENT_TYPES = ['card.status_changed', ...TRANSACTION_EVENT_TYPES] as const;
export type ConnectorEventType = (typeof CONNECTOR_EVENT_TYPES)[number];
export const isConnectorEventType = (value: unknown): value is ConnectorEventType =>
  typeof value === 'string' && (CONNECTOR_EVENT_TYPES as readonly string[]).includes(value);

/** The problem a free-text member holding a card number is refused with (D58). */
export const LOOKS_LIKE_A_CARD_NUMBER = 'looks like a card number';
export const UNKNOWN_ACCOUNT = 'is not an issuing account of this gateway';

/** A plain enum: one problem ("must be one of [...]") for a wrong value, where a union of literals gives one per literal. */
const Enum = <T extends string>(values: readonly T[]) => Type.Unsafe<T>({ type: 'string', enum: [...values] });
const StatusSchema = Enum<CardStatus>(CARD_STATUSES);

/** Identifiers are exempt from the card-number check (D58): their characters are bounded instead. */
const Identifier = (maxLength: number) => Type.String({ minLength: 1, maxLength, pattern: '^[A-Za-z0-9._:-]*$' });
const FreeText = (maxLength: number) => Type.String({ minLength: 1, maxLength });

/** The card record as `GET /v1/cards/{cardId}` answers it (connector-contract.ts), closed: PAN and CVC in full, dropped by the draft. */
const EventCardRecordSchema = Type.Object(
  {
    ...ConnectorCardSchema.properties,
    status: StatusSchema,
    issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
    requestId: Type.String({ minLength: 1, maxLength: 64 }),
    requestedCardLimit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);

const StatusChangedDataSchema = Type.Object(
  {
    card: EventCardRecordSchema,
    previousStatus: StatusSchema,
    status: StatusSchema,
    reason: Type.Optional(FreeText(200)),
  },
  { additionalProperties: false },
);

const MerchantSchema = Type.Object(
  {
    name: FreeText(100),
    categoryCode: Type.String({ pattern: '^[0-9]{4}$' }),
    country: Type.String({ pattern: '^[A-Z]{2}$' }),
  },
  { additionalProperties: false },
);

const transactionMembers = {
  transactionId: Identifier(128),
  cardId: Type.String({ minLength: 1, maxLength: MAX_CARD_ID_LENGTH, pattern: '^[A-Za-z0-9._:~-]+$' }),
  amount: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  merchant: MerchantSchema,
};
const TransactionDataSchema = Type.Object(transactionMembers, { additionalProperties: false });
/** Only a decline has a reason, and it always has one. */
const DeclinedDataSchema = Type.Object({ ...transactionMembers, declineReason: FreeText(200) }, { additionalProperties: false });

const envelope = <T extends ConnectorEventType, D extends TSchema>(type: T, data: D) =>
  Type.Object(
    {
      eventId: Identifier(128),
      type: Type.Literal(type),
      occurredAt: Type.String({ pattern: UTC_INSTANT_PATTERN }),
      issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
      data,
    },
    { additionalProperties: false },
  );

/** The body of `POST /v1/events`, one schema per type. */
export const ConnectorEventSchemas = {
  'card.status_changed': envelope('card.status_changed', StatusChangedDataSchema),
  'transaction.authorized': envelope('transaction.authorized', TransactionDataSchema),
  'transaction.declined': envelope('transaction.declined', DeclinedDataSchema),
  'transaction.cleared': envelope('transaction.cleared', TransactionDataSchema),
  'transaction.reversed': envelope('transaction.reversed', TransactionDataSchema),
} as const;

export type ConnectorStatusChangedEvent = Static<(typeof ConnectorEventSchemas)['card.status_changed']>;
export type ConnectorTransactionEvent = {
  [T in TransactionEventType]: Static<(typeof ConnectorEventSchemas)[T]>;
}[TransactionEventType];
export type ConnectorEvent = ConnectorStatusChangedEvent | ConnectorTransactionEvent;
export type ConnectorEventCardRecord = Static<typeof EventCardRecordSchema>;
export type ConnectorMerchant = Static<typeof MerchantSchema>;

/** What a body with no usable `type` is checked against: the envelope's members, to name all its problems at once. */
const AnyTypeSchema = Type.Object(
  {
    eventId: Identifier(128),
    type: Enum(CONNECTOR_EVENT_TYPES),
    occurredAt: Type.String({ pattern: UTC_INSTANT_PATTERN }),
    issuingAccount: Type.String({ minLength: 1, maxLength: 128 }),
    data: Type.Object({}),
  },
  { additionalProperties: false },
);

// Every problem of a body at once; no coercion, no member dropped.
const ajv = new Ajv({ allErrors: true, strict: false });
const validators = Object.fromEntries(CONNECTOR_EVENT_TYPES.map((type) => [type, ajv.compile(ConnectorEventSchemas[type])])) as Record<
  ConnectorEventType,
  ValidateFunction
>;
const checkAnyType = ajv.compile(AnyTypeSchema);

/** One problem of a body, shaped as Ajv reports them (a JSON pointer, a keyword, a message), so one renderer serves both. */
export interface ContractProblem {
  instancePath: string;
  keyword: string;
  message: string;
  params?: Record<string, unknown>;
}

export type ConnectorEventCheck = { ok: true; event: ConnectorEvent } | { ok: false; problems: ContractProblem[] };

const fromAjv = (error: ErrorObject): ContractProblem => ({
  instancePath: error.instancePath,
  keyword: error.keyword,
  message: error.message ?? 'is invalid',
  params: error.params as Record<string, unknown>,
});

const problem = (instancePath: string, message: string): ContractProblem => ({ instancePath, keyword: 'meaning', message });

/** An instant the pattern accepts but no calendar has (2026-02-30) reads back as another day. */
const isRealInstant = (text: string): boolean => {
  const ms = Date.parse(text);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 19) === text.slice(0, 19);
};

/** What the schema cannot say: a real instant, a card record that agrees with its event, no card number in free text (D58). */
function meaningProblems(event: ConnectorEvent): ContractProblem[] {
  const problems: ContractProblem[] = [];
  if (!isRealInstant(event.occurredAt)) problems.push(problem('/occurredAt', 'is not a real instant'));
  const freeText = (pointer: string, text: string | undefined) => {
    if (text !== undefined && containsCardNumber(text)) problems.push(problem(pointer, LOOKS_LIKE_A_CARD_NUMBER));
  };
  if (event.type === 'card.status_changed') {
    const { card, previousStatus, status, reason } = event.data;
    if (card.issuingAccount !== event.issuingAccount) problems.push(problem('/data/card/issuingAccount', "must be the event's issuingAccount"));
    if (card.status !== status) problems.push(problem('/data/card/status', 'must be data.status'));
    if (previousStatus === status) problems.push(problem('/data/previousStatus', 'must differ from data.status'));
    freeText('/data/reason', reason);
    for (const [key, value] of Object.entries(card.metadata ?? {})) {
      const pointer = `/data/card/metadata/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
      if (containsCardNumber(key)) problems.push(problem(pointer, 'has a name that looks like a card number'));
      freeText(pointer, value);
    }
  } else {
    freeText('/data/merchant/name', event.data.merchant.name);
    if (event.type === 'transaction.declined') freeText('/data/declineReason', event.data.declineReason);
  }
  return problems;
}

/**
 * Checks a parsed body against the contract: the schema of its type (every member, nothing
 * else), then what a schema cannot say. `isKnownAccount` refuses an issuing account the gateway
 * does not serve. All problems at once, as JSON pointers into the body.
 */
export function checkConnectorEvent(body: unknown, isKnownAccount: (account: string) => boolean = () => true): ConnectorEventCheck {
  const record = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
  const type = record?.['type'];
  // A body without a type of the contract is checked as an envelope only: its type is one of the problems.
  const validate = isConnectorEventType(type) ? validators[type] : checkAnyType;
  const shaped = validate(body) && validate !== checkAnyType;
  const problems = shaped ? meaningProblems(body as ConnectorEvent) : (validate.errors ?? []).map(fromAjv);
  const account = record?.['issuingAccount'];
  if (typeof account === 'string' && account !== '' && !isKnownAccount(account)) problems.push(problem('/issuingAccount', UNKNOWN_ACCOUNT));
  return problems.length === 0 ? { ok: true, event: body as ConnectorEvent } : { ok: false, problems };
}

/** The key a repeat of the connector's event is recognised by (D64): the store keeps it per issuing account. */
export const connectorEventDedupe = (eventId: string): string => createHash('sha256').update(eventId).digest('base64url');

/** What the listener hands the event recorder: one event of the connector, masked, with its dedupe key. */
export type ConnectorEventDraft = {
  [T in ConnectorEventType]: {
    readonly type: T;
    readonly issuingAccount: string;
    readonly cardId: string;
    readonly data: EventDataByType[T];
    readonly dedupe: string;
    readonly source: Extract<EventSource, 'processor'>;
  };
}[ConnectorEventType];

/**
 * The recorder's draft of a checked event: the card record masked (no PAN or CVC goes any
 * further), a status change marked as the processor's, a transaction with the envelope's
 * `occurredAt`.
 */
export function connectorEventDraft(event: ConnectorEvent): ConnectorEventDraft {
  const common = { issuingAccount: event.issuingAccount, dedupe: connectorEventDedupe(event.eventId), source: 'processor' } as const;
  if (event.type === 'card.status_changed') {
    const { card, previousStatus, status, reason } = event.data;
    return {
      ...common,
      type: event.type,
      cardId: card.cardId,
      data: { card: maskedCardRecord(card), previousStatus, status, ...(reason !== undefined && { reason }), source: 'processor' },
    };
  }
  const { transactionId, cardId, amount, currency, merchant } = event.data;
  const data = {
    transactionId,
    cardId,
    amount,
    currency,
    merchant: { name: merchant.name, categoryCode: merchant.categoryCode, country: merchant.country },
    occurredAt: event.occurredAt,
  };
  if (event.type === 'transaction.declined') return { ...common, type: event.type, cardId, data: { ...data, declineReason: event.data.declineReason } };
  return { ...common, type: event.type, cardId, data };
}
