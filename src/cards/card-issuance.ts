import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Clock } from '../foundation/clock.js';
import type { GatewayConfig } from '../config/config-types.js';
import { ConnectorError, type ConnectorCardRequest, type ConnectorClient, type ConnectorReply } from '../connector/connector-port.js';
import { connectorIdempotencyKey } from '../connector/connector-contract.js';
import { errors, GatewayError } from '../foundation/errors.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { UNKNOWN_CREATOR, type ClaimAttempt, type GatewayStore, type StoredCard } from '../store/store-types.js';
import type { CardSealer, CardSecrets } from './card-sealing.js';
import type { CardRequest } from './card-schemas.js';
import { maskCvc, maskPan } from '../foundation/masking.js';
import { requestFingerprint } from './request-fingerprint.js';

export interface IssuedCard {
  record: StoredCard;
  /** Plaintext secrets, in memory only, when this request received them from the connector. */
  fresh: CardSecrets | undefined;
  /** Answered from the idempotency record (D16): the header Idempotent-Replayed says so. */
  replayed: boolean;
  /** The connector answered with a card it made for an earlier, failed attempt (D31). */
  connectorReplay: boolean;
  payloadMismatch: boolean;
  /** The idempotency record key, also the AAD of the sealed secrets. */
  recordKey: string;
}

export interface IssueInput {
  issuingAccount: string;
  credentialId: string;
  body: CardRequest;
  effectiveLimit: number;
  correlationId: string;
}

/**
 * Claim owners: unique across replicas (a random process id) and within the process (a
 * counter), without a random UUID per card.
 */
const PROCESS_ID = randomUUID();
let claims = 0;
const nextOwner = (): string => `${PROCESS_ID}:${(claims += 1)}`;

/** What waiting on a key claimed by another process came to. */
type WaitOutcome = { state: 'completed'; record: StoredCard } | { state: 'free' } | { state: 'timeout'; leaseExpiresAt: number };

/**
 * The one spelling of a requestId (a UUID, whose letters compare case-insensitively): the
 * store's key, the connector's Idempotency-Key, the sealing's associated data and the audit
 * trail all use it, so one request reads the same across them.
 */
export const canonicalRequestId = (requestId: string): string => requestId.toLowerCase();

/**
 * Idempotent card creation (D16, D17, D28, D31): claim (issuing account, requestId) atomically in
 * the shared store, forward once, keep the answer (secrets sealed, D18) for 24 h.
 *
 * Duplicates are cheap. The first request for a key in this process resolves it for every
 * duplicate that arrives meanwhile: it claims the key, forwards (or, when another replica holds
 * the claim, polls the store until that replica is done), and the duplicates wait on it without
 * touching the store. Store cost per key per process: one claim plus, only while another replica
 * forwards, a few reads. At most `cards.maxWaitersPerKey` requests wait on one key; the rest get
 * 409 at once, and past the connector timeout a waiting duplicate gets 409 too. A failed forward
 * releases the claim; the retry reaches the connector with the same Idempotency-Key, so an
 * ambiguous timeout cannot make two cards, and the connector's replay of the card it made is
 * stored and answered (D31).
 */
export class CardIssuance {
  /** Keys this process is resolving now, and the record each resolves to. */
  readonly #resolving = new Map<string, Promise<StoredCard>>();
  readonly #waiters = new Map<string, number>();

  constructor(
    private readonly deps: {
      store: GatewayStore;
      clock: Clock;
      metrics: GatewayMetrics;
      connector: ConnectorClient;
      sealer: CardSealer;
      settings: { connector: GatewayConfig['connector']; cards: GatewayConfig['cards'] };
      logger: Logger;
    },
  ) {}

  async issue(input: IssueInput): Promise<IssuedCard> {
    const requestId = canonicalRequestId(input.body.requestId);
    // One string is the store's record key, the connector's Idempotency-Key and the sealing's
    // associated data: a drift between them would make records unopenable or cards duplicate.
    const recordKey = connectorIdempotencyKey(input.issuingAccount, requestId);
    const fingerprint = requestFingerprint({ ...input.body, requestId });
    const replay = (record: StoredCard): IssuedCard => ({
      record,
      fresh: undefined,
      replayed: true,
      connectorReplay: false,
      payloadMismatch: record.fingerprint !== fingerprint,
      recordKey,
    });

    const inProgress = this.#resolving.get(recordKey);
    if (inProgress) return replay(await this.#join(recordKey, inProgress));

    let settle!: { resolve(record: StoredCard): void; reject(error: unknown): void };
    const shared = new Promise<StoredCard>((resolve, reject) => (settle = { resolve, reject }));
    // Nobody may be waiting: a failure must not become an unhandled rejection.
    shared.catch(() => undefined);
    this.#resolving.set(recordKey, shared);
    try {
      const issued = await this.#resolve(recordKey, input, fingerprint, replay);
      settle.resolve(issued.record);
      return issued;
    } catch (error) {
      settle.reject(error);
      throw error;
    } finally {
      this.#resolving.delete(recordKey);
    }
  }

  /** Claims the key and forwards, or waits for the replica that holds the claim. */
  async #resolve(recordKey: string, input: IssueInput, fingerprint: string, replay: (record: StoredCard) => IssuedCard): Promise<IssuedCard> {
    const { store, clock, settings } = this.deps;
    const waitUntil = performance.now() + settings.connector.timeoutMs + 1000;
    const attempt: ClaimAttempt = { fingerprint, requestedCardLimit: input.body.cardLimit, credentialId: input.credentialId };
    for (;;) {
      const owner = nextOwner();
      const reservation = await store.idempotency.reserve(recordKey, { owner, now: clock.now(), leaseMs: settings.connector.timeoutMs + 5000, attempt });
      if (reservation.state === 'completed') return replay(reservation.record);
      if (reservation.state === 'reserved') return this.#own(recordKey, owner, input, attempt, reservation.previous);
      const outcome = await this.#waitForOtherReplica(recordKey, waitUntil);
      if (outcome.state === 'completed') return replay(outcome.record);
      if (outcome.state === 'timeout') throw errors.idempotencyInProgress(Math.max(1, (outcome.leaseExpiresAt - clock.now()) / 1000));
      // Released or lapsed: claim it again.
    }
  }

  /** Waits on the request resolving the key, as one of at most maxWaitersPerKey. */
  async #join(recordKey: string, shared: Promise<StoredCard>): Promise<StoredCard> {
    const { metrics, settings } = this.deps;
    const waiting = this.#waiters.get(recordKey) ?? 0;
    if (waiting >= settings.cards.maxWaitersPerKey) {
      metrics.idempotencyWaitersRefused.inc();
      throw errors.idempotencyInProgress(Math.max(1, settings.connector.timeoutMs / 1000));
    }
    this.#waiters.set(recordKey, waiting + 1);
    metrics.idempotencyWaiters.inc();
    try {
      return await shared;
    } finally {
      const left = (this.#waiters.get(recordKey) ?? 1) - 1;
      if (left === 0) this.#waiters.delete(recordKey);
      else this.#waiters.set(recordKey, left);
      metrics.idempotencyWaiters.dec();
    }
  }

  /** Polls the store, backing off, until the other replica's claim completes, frees or outlasts the wait. */
  async #waitForOtherReplica(recordKey: string, waitUntil: number): Promise<WaitOutcome> {
    const { store, clock } = this.deps;
    let pause = 10;
    for (;;) {
      await delay(pause);
      const seen = await store.idempotency.peek(recordKey, clock.now());
      if (seen.state === 'completed') return { state: 'completed', record: seen.record };
      if (seen.state === 'reserved') return { state: 'free' };
      if (performance.now() >= waitUntil) return { state: 'timeout', leaseExpiresAt: seen.leaseExpiresAt };
      pause = Math.min(Math.ceil(pause * 1.5), 200);
    }
  }

  async #own(recordKey: string, owner: string, input: IssueInput, attempt: ClaimAttempt, previous: ClaimAttempt | undefined): Promise<IssuedCard> {
    const { store, clock, settings, logger } = this.deps;
    const reply = await this.#forward(recordKey, owner, input);
    // The connector's replay is the card of the first attempt (D31). When the gateway no longer
    // knows that attempt, this requester is not known to be the creator, so nobody may reveal
    // the card (D28); the masked answer still goes out.
    const first = reply.replayed ? (previous ?? { ...attempt, credentialId: UNKNOWN_CREATOR }) : attempt;
    const payloadMismatch =
      reply.replayed &&
      (previous ? previous.fingerprint !== attempt.fingerprint : reply.card.cardLimit !== input.effectiveLimit || reply.card.currency !== input.body.currency);
    const record = this.#record(reply, recordKey, first);
    const now = clock.now();
    try {
      await store.idempotency.complete(recordKey, { owner, record, expiresAt: now + settings.cards.idempotencyTtlSeconds * 1000, now });
    } catch (error) {
      // The card exists: give it to the client. The store writes the record once it answers
      // again; a retry before that reaches the connector with the same Idempotency-Key and gets
      // this card back, so a late record costs no duplicate.
      logger.warn(
        { reason: (error as Error).message, cardId: record.card.cardId, correlationId: input.correlationId },
        'card created; its idempotency record is written when the store answers again',
      );
    }
    return { record, fresh: { pan: reply.card.pan, cvc: reply.card.cvc }, replayed: false, connectorReplay: reply.replayed, payloadMismatch, recordKey };
  }

  #record(reply: ConnectorReply, recordKey: string, first: ClaimAttempt): StoredCard {
    const { card } = reply;
    return {
      fingerprint: first.fingerprint,
      creator: first.credentialId,
      card: {
        cardId: card.cardId,
        maskedPan: maskPan(card.pan),
        maskedCvc: maskCvc(card.cvc),
        expMonth: card.expMonth,
        expYear: card.expYear,
        status: card.status,
        requestedCardLimit: first.requestedCardLimit,
        cardLimit: card.cardLimit,
        currency: card.currency,
        createdAt: card.createdAt,
      },
      sealedSecrets: this.deps.sealer.seal({ pan: card.pan, cvc: card.cvc }, recordKey),
    };
  }

  async #forward(recordKey: string, owner: string, input: IssueInput): Promise<ConnectorReply> {
    const { connector, metrics, store, clock, settings } = this.deps;
    const payload: ConnectorCardRequest = {
      requestId: canonicalRequestId(input.body.requestId),
      issuingAccount: input.issuingAccount,
      requestedCardLimit: input.body.cardLimit,
      cardLimit: input.effectiveLimit,
      currency: input.body.currency,
      config: input.body.config ?? {},
      metadata: input.body.metadata ?? {},
    };
    const started = performance.now();
    try {
      const reply = await connector.createCard(payload, { idempotencyKey: recordKey, correlationId: input.correlationId });
      metrics.connectorDuration.observe({ outcome: 'ok' }, (performance.now() - started) / 1000);
      return reply;
    } catch (error) {
      const kind = error instanceof ConnectorError ? error.kind : 'error';
      metrics.connectorDuration.observe({ outcome: kind }, (performance.now() - started) / 1000);
      // Counted here and audited by the card service (card.failed): a connector outage must not
      // become a log line per request.
      metrics.connectorErrors.inc({ kind });
      const now = clock.now();
      try {
        await store.idempotency.release(recordKey, { owner, now, keepUntil: now + settings.cards.idempotencyTtlSeconds * 1000 });
      } catch {
        // The store is gone too: it releases the claim itself once it answers again.
      }
      if (kind === 'timeout') throw errors.connectorTimeout(error);
      if (kind === 'invalid_answer') throw errors.connectorInvalidAnswer(error);
      throw errors.connectorUnavailable(error);
    }
  }
}

/** The connector failure kind behind a 502/504, for the audit line; undefined for other errors. */
export function connectorFailureOf(error: unknown): string | undefined {
  if (!(error instanceof GatewayError)) return undefined;
  const cause = error.cause;
  return cause instanceof ConnectorError ? cause.kind : undefined;
}
