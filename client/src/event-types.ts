import type { CardStatus } from './types.js';

/**
 * The events the gateway sends to a webhook endpoint and answers at `GET /api/v1/issuing/events`
 * (D63). A copy of the gateway's own types (client/test/server-types.test.ts keeps the two equal).
 */

/**
 * Every event type this version knows, in the gateway's order. A newer gateway may send a type
 * not listed yet (a new type is a minor release): acknowledge it and move on.
 */
export const EVENT_TYPES = [
  'card.created',
  'card.status_changed',
  'transaction.authorized',
  'transaction.declined',
  'transaction.cleared',
  'transaction.reversed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Who changed a card's status: a client through the API, or the processor (reported by the connector). */
export type EventSource = 'api' | 'processor';

/**
 * The card as a client without `revealDetails` sees it (a `CardRecord`, masked): `pan` masked to
 * its last four digits, `cvc` to stars. `requestId` and `metadata` are there when the event's
 * source knows them (a status change does; a creation's answer has no metadata).
 */
export interface EventCard {
  readonly cardId: string;
  readonly pan: string;
  readonly cvc: string;
  readonly expMonth: number;
  readonly expYear: number;
  readonly status: CardStatus;
  readonly requestedCardLimit: number;
  readonly cardLimit: number;
  readonly currency: string;
  readonly createdAt: string;
  readonly requestId?: string;
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface CardCreatedData {
  readonly card: EventCard;
}

export interface CardStatusChangedData {
  readonly card: EventCard;
  readonly previousStatus: CardStatus;
  readonly status: CardStatus;
  readonly reason?: string;
  readonly source: EventSource;
  /** The credential that changed it (source `api` only). */
  readonly credentialId?: string;
}

export interface Merchant {
  readonly name: string;
  /** ISO 18245 merchant category code: 4 digits. */
  readonly categoryCode: string;
  /** ISO 3166-1 alpha-2. */
  readonly country: string;
}

export interface TransactionData {
  readonly transactionId: string;
  readonly cardId: string;
  /** Integer, in the currency's minor units. */
  readonly amount: number;
  readonly currency: string;
  readonly merchant: Merchant;
  /** RFC 3339, when the processor saw it. */
  readonly occurredAt: string;
  /** `transaction.declined` only. */
  readonly declineReason?: string;
}

export interface EventDataByType {
  'card.created': CardCreatedData;
  'card.status_changed': CardStatusChangedData;
  'transaction.authorized': TransactionData;
  'transaction.declined': TransactionData;
  'transaction.cleared': TransactionData;
  'transaction.reversed': TransactionData;
}

/**
 * One event, immutable once recorded; `type` tells its `data` apart. `sequence` grows with every
 * event of the issuing account, so it grows per card too: drop an update older than one already
 * applied.
 */
export type GatewayEvent = {
  [T in EventType]: {
    readonly id: string;
    readonly type: T;
    /** RFC 3339 with milliseconds, the gateway's clock when it recorded the event. */
    readonly createdAt: string;
    readonly issuingAccount: string;
    readonly sequence: number;
    readonly data: EventDataByType[T];
  };
}[EventType];

/** The event of one type: `EventOfType<'card.created'>`. */
export type EventOfType<T extends EventType> = Extract<GatewayEvent, { type: T }>;
