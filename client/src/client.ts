import { randomUUID } from 'node:crypto';
import { ApiError, SessionEndedError } from './errors.js';
import * as operations from './operations.js';
import {
  callScope,
  resolveSettings,
  type CallOptions,
  type CardGatewayClientOptions,
  type CreateCardOptions,
  type GetCardOptions,
  type Settings,
} from './options.js';
import { Pipeline } from './pipeline.js';
import { Sender } from './send.js';
import { Session } from './session.js';
import type { CardListQuery, CardPage, CardRecord, CardRequest, CardStatus, CardStatusAnswer, CreateCardInput, CreatedCard, SessionTokens } from './types.js';

/**
 * A client of the card issuing gateway. One instance holds one session (one login) and may be
 * shared by any number of concurrent callers: they all see one refresh at a time.
 */
export class CardGatewayClient {
  readonly #settings: Settings;
  readonly #sender: Sender;
  readonly #pipeline: Pipeline;
  readonly #session: Session;

  constructor(options: CardGatewayClientOptions) {
    this.#settings = resolveSettings(options);
    this.#sender = new Sender(this.#settings, options);
    this.#pipeline = new Pipeline(this.#settings, this.#sender);
    const refresh = (presented: SessionTokens, deadlineAt: number): Promise<SessionTokens> =>
      this.#pipeline.run({ operation: 'refresh', deadlineAt }, operations.refresh(presented));
    this.#session = new Session(this.#settings, refresh, options.session);
  }

  /** A copy of the current tokens, or undefined when there is no session. */
  get session(): SessionTokens | undefined {
    return this.#session.tokens;
  }

  /**
   * Logs in and keeps the session. Retried within the deadline, like every operation, on network
   * errors, timeouts and the retryable statuses (RETRYABLE_STATUSES: 409, 429, 502, 503, 504): a
   * repeated login only leaves an unused session behind. A previous session of this client is
   * dropped, not logged out.
   */
  async login(username: string, password: string, options: CallOptions = {}): Promise<SessionTokens> {
    const tokens = await this.#pipeline.run(callScope(this.#settings, 'login', options), operations.login(username, password));
    this.#session.start(tokens);
    return { ...tokens };
  }

  /**
   * A valid access token, refreshed first when fewer than `refreshBeforeSeconds` remain. Use it
   * for gateway calls this client does not wrap. Concurrent callers share one refresh; the wait
   * for it ends at this call's deadline (a retryable `timeout` NetworkError) or signal.
   */
  async accessToken(options: CallOptions = {}): Promise<string> {
    const session = this.#session.require();
    return this.#session.freshAccessToken(session, callScope(this.#settings, 'refresh', options));
  }

  /**
   * Refreshes now (joining a refresh already in flight) and returns the new tokens. The wait ends
   * at this call's deadline or signal; the refresh itself runs on for other callers.
   */
  async refresh(options: CallOptions = {}): Promise<SessionTokens> {
    const session = this.#session.require();
    const outcome = await this.#session.awaitRefresh(session, callScope(this.#settings, 'refresh', options));
    if (outcome.failed) throw outcome.error;
    return { ...this.#session.require().tokens };
  }

  /**
   * Revokes the session at the gateway (the refresh token's whole family) and forgets it. The
   * access token is refreshed first when due, as for any call: the gateway refuses an expired one
   * before it looks at the refresh token. A 401 saying the session is already over
   * (`refresh_token_*`, `credential_inactive`, `token_revoked`) is the outcome asked for, so it resolves too. A 401
   * refusing the access token (`token_expired`, `token_invalid`, ...) revoked nothing: the session
   * is forgotten here, but logout rejects with SessionEndedError `revoke_failed`, because its
   * refresh tokens stay valid at the gateway until they expire. Any other failure keeps the
   * session so that logout can be called again.
   */
  async logout(options: CallOptions = {}): Promise<void> {
    const session = this.#session.current;
    if (!session) return;
    const scope = callScope(this.#settings, 'logout', options);
    try {
      await this.#pipeline.run(scope, operations.logout(this.#session, session, scope));
    } catch (error) {
      // A refresh on the way may have been refused: its 401 says the same as one to the logout.
      const refusal = error instanceof SessionEndedError && error.cause instanceof ApiError ? error.cause : error;
      if (!(refusal instanceof ApiError && refusal.status === 401)) throw error;
      if (!operations.SESSION_OVER_CODES.has(refusal.code)) {
        this.#session.end(session, 'access_rejected', refusal);
        throw new SessionEndedError('revoke_failed', refusal);
      }
    }
    this.#session.end(session, 'logged_out', undefined);
  }

  /**
   * Creates a card, idempotently. The requestId is generated (UUID v4) unless given, and every
   * retry sends the same one, so a retry can never create a second card: after a network error,
   * a timeout, 409, 429, 502, 503 or 504 the call waits (Retry-After when the gateway names it,
   * else jittered backoff) and tries again until `deadlineMs`. Other 4xx are final. When the
   * call gives up, the error's `requestId` can be passed to a later createCard to finish it.
   */
  async createCard(input: CreateCardInput, options: CreateCardOptions = {}): Promise<CreatedCard> {
    const requestId = input.requestId ?? randomUUID();
    const body: CardRequest = { ...input, requestId };
    const scope = callScope(this.#settings, 'createCard', options, requestId);
    return this.#pipeline.run(scope, operations.createCard(this.#session, scope, body, options.revealDetails === true));
  }

  /**
   * The card as it is now (status included), masked unless `revealDetails`. Needs `cards:read`.
   * Retried like createCard (network errors, timeouts, 429, 502, 503, 504); 404 `card_not_found`
   * (unknown, or another issuing account's) is final.
   */
  async getCard(cardId: string, options: GetCardOptions = {}): Promise<CardRecord> {
    const scope = callScope(this.#settings, 'getCard', options);
    return this.#pipeline.run(scope, operations.getCard(this.#session, scope, cardId, options.revealDetails === true));
  }

  /**
   * One page of the issuing account's cards, newest first, masked. Needs `cards:read`. For the
   * next page pass its `nextCursor` as `cursor` with the same filters (else 400 `invalid_cursor`,
   * final). Retried like getCard.
   */
  async listCardsPage(query: CardListQuery = {}, options: CallOptions = {}): Promise<CardPage> {
    const scope = callScope(this.#settings, 'listCards', options);
    return this.#pipeline.run(scope, operations.listCardsPage(this.#session, scope, query));
  }

  /**
   * Every card matching `query`, newest first, page after page (`limit` cards per request,
   * following `nextCursor`; from `query.cursor` when given). Each page is one operation with its
   * own deadline and retries; a page that fails ends the iteration with its error.
   */
  async *listCards(query: CardListQuery = {}, options: CallOptions = {}): AsyncGenerator<CardRecord, void, undefined> {
    let cursor = query.cursor;
    do {
      const page = await this.listCardsPage({ ...query, cursor }, options);
      yield* page.data;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Freezes the card (status `inactive`). See cancelCard for the answer and the retry rules. Needs `cards:update`. */
  freezeCard(cardId: string, reason?: string, options: CallOptions = {}): Promise<CardStatusAnswer> {
    return this.#changeStatus('freezeCard', cardId, 'inactive', reason, options);
  }

  /** Unfreezes the card (status `active`). See cancelCard for the answer and the retry rules. Needs `cards:update`. */
  unfreezeCard(cardId: string, reason?: string, options: CallOptions = {}): Promise<CardStatusAnswer> {
    return this.#changeStatus('unfreezeCard', cardId, 'active', reason, options);
  }

  /**
   * Cancels the card for good. `reason` (1 to 200 characters) goes to the audit trail; one that
   * holds a card number is refused (400 `validation_failed`). Resolves to the card's id, its status
   * now and `previousStatus`, the status just before this call (equal when nothing changed); with
   * `cards:read` also the whole card, masked (`isWholeCard` tells). A status change is safe to
   * repeat (the status the card already has answers 200, unchanged), so it is retried like
   * getCard; any change of a canceled card is 409 `card_canceled`, final. Needs `cards:update`.
   */
  cancelCard(cardId: string, reason?: string, options: CallOptions = {}): Promise<CardStatusAnswer> {
    return this.#changeStatus('cancelCard', cardId, 'canceled', reason, options);
  }

  async #changeStatus(
    operation: 'freezeCard' | 'unfreezeCard' | 'cancelCard',
    cardId: string,
    status: CardStatus,
    reason: string | undefined,
    options: CallOptions,
  ): Promise<CardStatusAnswer> {
    const scope = callScope(this.#settings, operation, options);
    return this.#pipeline.run(scope, operations.changeCardStatus(this.#session, scope, cardId, status, reason));
  }

  /** Closes the connections this client opened. A later call opens new ones. */
  async close(): Promise<void> {
    await this.#sender.close();
  }
}
