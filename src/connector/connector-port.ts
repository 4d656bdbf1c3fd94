import type { CardStatus } from '../foundation/card-status.js';
import type {
  ConnectorCard,
  ConnectorCardPage,
  ConnectorCardRecord,
  ConnectorCardRequest,
  ConnectorListQuery,
  ConnectorStatusChange,
} from './connector-contract.js';

export type {
  ConnectorCard,
  ConnectorCardPage,
  ConnectorCardRecord,
  ConnectorCardRequest,
  ConnectorListQuery,
  ConnectorStatusChange,
} from './connector-contract.js';

/**
 * How a call to the connector failed; D19 answers `timeout` with 504 and every other kind with
 * 502. `status` is an answer the contract does not have: a 5xx, or a 4xx that refuses the gateway
 * itself (401, 403, 429, ...). A 4xx about the card id a client chose is no failure: that card is
 * not found (D60).
 */
export type ConnectorFailureKind = 'refused' | 'reset' | 'timeout' | 'status' | 'invalid_answer' | 'error';

/** The one way a connector call fails: its kind says what the client is answered (cards/card-errors.ts). */
export class ConnectorError extends Error {
  constructor(
    readonly kind: ConnectorFailureKind,
    options: { cause?: unknown; status?: number } = {},
  ) {
    super(`connector ${kind}${options.status ? ` ${options.status}` : ''}`, { cause: options.cause });
    this.name = 'ConnectorError';
  }
}

/** A card the connector answered with: created now (201), or its own replay of the key (200). */
export interface ConnectorReply {
  card: ConnectorCard;
  replayed: boolean;
}

/**
 * The outcome of a status change (D45, D57): the card after the call with the status it had
 * before it and whether this call changed it; or the connector's refusals, which are answers, not
 * failures: a 4xx on the id the client chose is `not_found` (D60), a 409 `card_canceled` is final.
 */
export type ConnectorStatusResult =
  { outcome: 'updated'; card: ConnectorCardRecord; previousStatus: CardStatus; changed: boolean } | { outcome: 'not_found' } | { outcome: 'card_canceled' };

/** Per-call context of the lifecycle calls: no Idempotency-Key, they are safe to repeat. */
export interface ConnectorCallMeta {
  correlationId: string;
}

/**
 * The port the card use cases call the processor through, built once per gateway (the undici
 * adapter, connector-client.ts, in production; tests may implement it). Every call rejects
 * with a ConnectorError and nothing else.
 */
export interface ConnectorClient {
  /** Sends one card creation. Never retried (a POST): the retry is the client's, under the same key. */
  createCard(payload: ConnectorCardRequest, meta: { idempotencyKey: string; correlationId: string }): Promise<ConnectorReply>;
  /**
   * `GET /v1/cards/{cardId}?issuingAccount=` (D43): the record, or null on the connector's 404.
   * The answer's shape is checked here; whether it names the caller's account is the use
   * case's check (cards/), so that a mismatch is logged and counted in one place.
   */
  getCard(issuingAccount: string, cardId: string, meta: ConnectorCallMeta): Promise<ConnectorCardRecord | null>;
  /** `GET /v1/cards?...` (D44): one page, every record's shape checked; never a partial list. */
  listCards(query: ConnectorListQuery, meta: ConnectorCallMeta): Promise<ConnectorCardPage>;
  /** `POST /v1/cards/{cardId}/status` (D45): one call changes the status and says what it was (D57). */
  setCardStatus(cardId: string, change: ConnectorStatusChange, meta: ConnectorCallMeta): Promise<ConnectorStatusResult>;
  /** Resolves while `GET /health` answers 200 within a second and the pool can take work. */
  health(): Promise<void>;
  /** Requests in progress and requests waiting for a connection. */
  poolLoad(): { inFlight: number; queued: number };
  close(): Promise<void>;
}
