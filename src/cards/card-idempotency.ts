import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { GatewayConfig } from '../config/config-types.js';
import { ConnectorError } from '../connector/connector-port.js';
import type { Clock } from '../foundation/clock.js';
import { errors } from '../foundation/errors.js';
import type { Outcomes, RequestContext } from '../observability/outcomes.js';
import type { ClaimAttempt, GatewayStore, StoredCard } from '../store/store-types.js';
import type { CardSecrets } from './card-sealing.js';
import type { PendingRecords } from './pending-records.js';

/**
 * The one spelling of a requestId (a UUID, whose letters compare case-insensitively): the
 * store's key, the connector's Idempotency-Key, the sealing's associated data and the audit
 * trail all use it, so one request reads the same across them.
 */
export const canonicalRequestId = (requestId: string): string => requestId.toLowerCase();

/** What the idempotency needs to know of a creation request. */
export interface ClaimRequest {
  /**
   * `issuingAccount:requestId`: the store's record key, and also the connector's
   * Idempotency-Key and the sealing's associated data (a drift between them would make records
   * unopenable or cards duplicate).
   */
  readonly recordKey: string;
  readonly attempt: ClaimAttempt;
  readonly context: RequestContext;
}

/** How a key resolved for one request. */
export interface IssuedCard {
  record: StoredCard;
  /** Plaintext secrets, in memory only, when this request received them from the connector. */
  fresh: CardSecrets | undefined;
  /** Answered from the idempotency record (D16): the header Idempotent-Replayed says so. */
  replayed: boolean;
  /** The connector answered with a card it made for an earlier, failed attempt (D31). */
  connectorReplay: boolean;
  payloadMismatch: boolean;
}

/** Forwards a request whose key this process holds; rejects with a ConnectorError when the forward failed. */
export type Forward<R extends ClaimRequest> = (request: R, previous: ClaimAttempt | undefined) => Promise<IssuedCard>;

/**
 * Told of a card this process forwarded, in the same turn as its record's write (so that what it
 * writes travels with the record, D64); its promise settles when that write did, never rejects.
 */
export type Announce<R extends ClaimRequest> = (request: R, issued: IssuedCard) => Promise<void>;

type ClaimSettings = {
  connector: Pick<GatewayConfig['connector'], 'timeoutMs'>;
  cards: Pick<GatewayConfig['cards'], 'maxWaitersPerKey' | 'idempotencyTtlSeconds'>;
  store: GatewayConfig['store'];
};

/** What forwarding under a claim came to, and the record's write when the answer does not wait for it. */
type Owned = { issued: IssuedCard; recorded: Promise<void> | undefined };

/**
 * Claim owners: unique across replicas (a random process id) and within the process (a
 * counter), without a random UUID per card.
 */
const PROCESS_ID = randomUUID();
let claims = 0;
const nextOwner = (): string => `${PROCESS_ID}:${(claims += 1)}`;

/** What waiting on a key claimed by another process came to. */
type WaitOutcome = { state: 'completed'; record: StoredCard } | { state: 'free' } | { state: 'timeout'; leaseExpiresAt: number };

const JOINED = { name: 'card.duplicate_joined' } as const;
const LEFT = { name: 'card.duplicate_left' } as const;
const REFUSED = { name: 'card.duplicate_refused' } as const;

const replayOf = (record: StoredCard, attempt: ClaimAttempt): IssuedCard => ({
  record,
  fresh: undefined,
  replayed: true,
  connectorReplay: false,
  payloadMismatch: record.fingerprint !== attempt.fingerprint,
});

/**
 * Claiming and waiting (D16, D17, D31): a key of (issuing account, requestId) is claimed
 * atomically in the shared store, forwarded once, and its answer kept for 24 h.
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
export class CardClaims<R extends ClaimRequest> {
  /** Keys this process is resolving now, and the record each resolves to. */
  readonly #resolving = new Map<string, Promise<StoredCard>>();
  readonly #waiters = new Map<string, number>();
  /** `store.redis.replicasToAck` (restart-only): the operator asked for the record on replicas before the answer (D35). */
  readonly #answerAfterRecord: boolean;

  constructor(
    private readonly deps: { store: GatewayStore; clock: Clock; outcomes: Outcomes; settings: ClaimSettings; pendingRecords: PendingRecords },
    private readonly forward: Forward<R>,
    private readonly announce?: Announce<R>,
  ) {
    const { store } = deps.settings;
    this.#answerAfterRecord = store.kind === 'redis' && store.replicasToAck > 0;
  }

  async resolve(request: R): Promise<IssuedCard> {
    const { recordKey } = request;
    const inProgress = this.#resolving.get(recordKey);
    if (inProgress) return replayOf(await this.#join(request, inProgress), request.attempt);

    let settle!: { resolve(record: StoredCard): void; reject(error: unknown): void };
    const shared = new Promise<StoredCard>((resolve, reject) => (settle = { resolve, reject }));
    // Nobody may be waiting: a failure must not become an unhandled rejection.
    shared.catch(() => undefined);
    this.#resolving.set(recordKey, shared);
    let recorded: Promise<void> | undefined;
    try {
      const owned = await this.#claim(request);
      recorded = owned.recorded;
      settle.resolve(owned.issued.record);
      return owned.issued;
    } catch (error) {
      settle.reject(error);
      throw error;
    } finally {
      // While the record is on its way to the store, a duplicate in this process is answered
      // from memory: claiming would find the key still held and poll for it.
      if (recorded) void recorded.then(() => this.#resolving.delete(recordKey));
      else this.#resolving.delete(recordKey);
    }
  }

  /** Claims the key and forwards, or waits for the replica that holds the claim. */
  async #claim(request: R): Promise<Owned> {
    const { store, clock, settings } = this.deps;
    const { recordKey, attempt } = request;
    const waitUntil = performance.now() + settings.connector.timeoutMs + 1000;
    for (;;) {
      const owner = nextOwner();
      const reservation = await store.idempotency.reserve(recordKey, { owner, now: clock.now(), leaseMs: settings.connector.timeoutMs + 5000, attempt });
      if (reservation.state === 'completed') return { issued: replayOf(reservation.record, attempt), recorded: undefined };
      if (reservation.state === 'reserved') return this.#own(request, owner, reservation.previous);
      const outcome = await this.#waitForOtherReplica(recordKey, waitUntil);
      if (outcome.state === 'completed') return { issued: replayOf(outcome.record, attempt), recorded: undefined };
      if (outcome.state === 'timeout') throw errors.idempotencyInProgress(Math.max(1, (outcome.leaseExpiresAt - clock.now()) / 1000));
      // Released or lapsed: claim it again.
    }
  }

  /** Waits on the request resolving the key, as one of at most maxWaitersPerKey. */
  async #join(request: R, shared: Promise<StoredCard>): Promise<StoredCard> {
    const { outcomes, settings } = this.deps;
    const { recordKey, context } = request;
    const waiting = this.#waiters.get(recordKey) ?? 0;
    if (waiting >= settings.cards.maxWaitersPerKey) {
      outcomes.record(REFUSED, context);
      throw errors.idempotencyInProgress(Math.max(1, settings.connector.timeoutMs / 1000));
    }
    this.#waiters.set(recordKey, waiting + 1);
    outcomes.record(JOINED, context);
    try {
      return await shared;
    } finally {
      const left = (this.#waiters.get(recordKey) ?? 1) - 1;
      if (left === 0) this.#waiters.delete(recordKey);
      else this.#waiters.set(recordKey, left);
      outcomes.record(LEFT, context);
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

  /**
   * Forwards under the claim this process holds, and keeps the answer (or frees the key for a
   * retry). The card is answered before the store acknowledges its record (issue 20): a record
   * that fails to land is already answered the same way (`card.record_deferred`), so waiting
   * bought no guarantee, only a round trip. Duplicates meanwhile are answered from memory in this
   * process and wait for the record on other replicas, as for any claim in flight. Only
   * `store.redis.replicasToAck` keeps the wait: the operator asked for the record on replicas
   * before the client is answered (D35).
   */
  async #own(request: R, owner: string, previous: ClaimAttempt | undefined): Promise<Owned> {
    const { store, clock, settings, outcomes, pendingRecords } = this.deps;
    const { recordKey } = request;
    let issued: IssuedCard;
    try {
      issued = await this.forward(request, previous);
    } catch (error) {
      if (error instanceof ConnectorError) {
        const now = clock.now();
        try {
          await store.idempotency.release(recordKey, { owner, now, keepUntil: now + settings.cards.idempotencyTtlSeconds * 1000 });
        } catch {
          // The store is gone too: it releases the claim itself once it answers again.
        }
      }
      throw error;
    }
    const now = clock.now();
    const record = (): Promise<unknown> => {
      const write = store.idempotency
        .complete(recordKey, { owner, record: issued.record, expiresAt: now + settings.cards.idempotencyTtlSeconds * 1000, now })
        .catch((error: unknown) => {
          // The card exists: give it to the client. The store writes the record once it answers
          // again; a retry before that reaches the connector with the same Idempotency-Key and gets
          // this card back, so a late record costs no duplicate.
          outcomes.record({ name: 'card.record_deferred', cardId: issued.record.card.cardId, reason: (error as Error).message }, request.context);
        });
      const announced = this.announce?.(request, issued);
      return announced ? Promise.all([write, announced]) : write;
    };
    // Without replicasToAck the record and its event are made once the answer is on its way
    // (issue 34): their JSON, encoding and commands cost about as much CPU as the claim, and the
    // client waits for none of it. Both still go in one turn, so they share a round trip. An
    // immediate runs before the loop reads any socket again, so nothing the client does after
    // this answer (a status change and its event) can reach the store ahead of them from this process.
    const written = this.#answerAfterRecord ? record() : new Promise<void>((resolve) => setImmediate(resolve)).then(record);
    const recorded = pendingRecords.track(recordKey, issued.record, written);
    if (this.#answerAfterRecord) await recorded;
    return { issued, recorded };
  }
}
