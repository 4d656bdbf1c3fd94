/** The gateway's request and response shapes (README "Card creation", the OpenAPI description). */

/** What login and refresh answer; refresh keeps the login's ID token. Times are Unix seconds. */
export interface SessionTokens {
  accessToken: string;
  accessTokenExpiresAt: number;
  refreshToken: string;
  refreshTokenExpiresAt: number;
  /** From login only; not needed for API calls. */
  idToken?: string | undefined;
  idTokenExpiresAt?: number | undefined;
}

export interface CardConfig {
  /** Months, 1 to 60. */
  expiryDuration?: number;
  /** ISO 8601 UTC timestamps; startDate before endDate. */
  authorizationWindow?: { startDate: string; endDate: string };
  /** The effective limit is cardLimit + floor(cardLimit * percentage / 100). */
  tolerance?: { percentage: number };
  cardType?: string;
  maxTransactions?: number;
  allowedCategories?: string[];
}

/** The body of POST /api/v1/issuing/cards. */
export interface CardRequest {
  /** UUID-shaped idempotency key, per issuing account, for 24 h. */
  requestId: string;
  /** Minor units, a positive integer. */
  cardLimit: number;
  /** ISO 4217, enabled for the credential's issuing account. */
  currency: string;
  config?: CardConfig;
  /** Free strings: at most 50 members, keys up to 40 characters, values up to 500. */
  metadata?: Record<string, string>;
}

/** createCard's input: the requestId is generated when left out. */
export type CreateCardInput = Omit<CardRequest, 'requestId'> & { requestId?: string | undefined };

/** Every card state, in the gateway's order (a test keeps it equal to the gateway's list). */
export const CARD_STATUSES = ['active', 'canceled', 'inactive'] as const;

export type CardStatus = (typeof CARD_STATUSES)[number];

/** The card record. */
export interface Card {
  cardId: string;
  status: CardStatus;
  /** ISO 8601 UTC. */
  createdAt: string;
  /** ISO 4217. */
  currency: string;
  /** The limit asked for, in minor units. */
  requestedCardLimit: number;
  /** The effective limit, in minor units: the requested one plus its tolerance. */
  cardLimit: number;
  /** Unless revealed, every digit but the last four is `*` (`************4242`). */
  pan: string;
  /** Unless revealed, every digit is `*`. */
  cvc: string;
  expMonth: number;
  expYear: number;
}

export interface CreatedCard {
  card: Card;
  /** The requestId used (generated or given): keep it to replay or reveal this card later. */
  requestId: string;
  /**
   * `Idempotent-Replayed: true`: the gateway answered an earlier creation with this requestId.
   * Also true when an earlier attempt of this same call created the card and its answer was lost.
   */
  replayed: boolean;
  /** `Idempotency-Payload-Mismatch: true`: the card is the original, created from another payload. */
  payloadMismatch: boolean;
  correlationId: string | undefined;
  /** Requests sent, 1 when the first attempt succeeded. */
  attempts: number;
}

/** A card as reading, listing and status changes answer it: the creation's record plus its requestId and metadata. */
export interface CardRecord extends Card {
  /** The requestId of the creation that made the card. */
  requestId: string;
  /** The creation's metadata (`{}` when it had none). */
  metadata: Record<string, string>;
}

/**
 * What a status change answers to a credential that also holds `cards:read`: the card as it is
 * now, masked, and the status it had just before the request.
 */
export interface CardStatusChanged extends CardRecord {
  /** The status before this request: equal to `status` when the request changed nothing. */
  previousStatus: CardStatus;
}

/** What a status change answers to a credential with `cards:update` alone: no more than it may read. */
export interface CardStatusSummary {
  cardId: string;
  /** The status the card has now. */
  status: CardStatus;
  /** The status before this request: equal to `status` when the request changed nothing. */
  previousStatus: CardStatus;
}

/** A status change's answer: the whole card with `cards:read`, the summary without it (`isWholeCard` tells them apart). */
export type CardStatusAnswer = CardStatusChanged | CardStatusSummary;

/** True when a status change answered the whole card (the credential holds `cards:read`). */
export const isWholeCard = (answer: CardStatusAnswer): answer is CardStatusChanged => 'pan' in answer;

/** One page of `GET /api/v1/issuing/cards`: newest first, every card masked. */
export interface CardPage {
  data: CardRecord[];
  /** Pass as `cursor` (with the same filters) for the next page; null on the last page. */
  nextCursor: string | null;
}

/** The query of `GET /api/v1/issuing/cards`. */
export interface CardListQuery {
  /** Cards per page, 1 to 100 (default 20); may change between pages. */
  limit?: number;
  /** A page's `nextCursor`, unchanged; only valid with the filters of the listing it came from. */
  cursor?: string;
  status?: CardStatus;
  /** ISO 8601 UTC with `Z`, inclusive. */
  createdAfter?: string;
  /** ISO 8601 UTC with `Z`, inclusive; not earlier than createdAfter. */
  createdBefore?: string;
}
