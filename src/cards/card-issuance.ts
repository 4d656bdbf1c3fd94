import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import type { Clock } from '../clock.js';
import type { GatewayConfig } from '../config/load-config.js';
import { parseConnectorCard } from '../connector/connector-answer.js';
import { ConnectorError, forwardToConnector, type ConnectorCardRequest } from '../connector/connector-client.js';
import { errors } from '../edge/errors.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { GatewayStore, StoredCard } from '../store/store-types.js';
import { sealCardSecrets, type CardSecrets } from './card-sealing.js';
import type { CardRequest } from './card-schemas.js';
import { maskCvc, maskPan } from './mask-card.js';
import { requestFingerprint } from './request-fingerprint.js';

export interface IssuedCard {
  record: StoredCard;
  /** Plaintext secrets, in memory only, when this request created the card. */
  fresh: CardSecrets | undefined;
  replayed: boolean;
  payloadMismatch: boolean;
  /** The idempotency record key, also the AAD of the sealed secrets. */
  recordKey: string;
}

/**
 * Idempotent card creation (D16, D17): claim (issuing account, requestId) atomically in the
 * shared store, forward once, keep the answer (secrets sealed, D18) for 24 h. Concurrent
 * duplicates wait for the first and replay its card; past the upstream timeout they get 409.
 * A failed forward releases the claim; the retry reaches the connector with the same
 * Idempotency-Key, so an ambiguous timeout cannot make two cards.
 */
export class CardIssuance {
  constructor(
    private readonly deps: {
      store: GatewayStore;
      clock: Clock;
      metrics: GatewayMetrics;
      connector: GatewayConfig['connector'];
      cards: GatewayConfig['cards'];
    },
  ) {}

  async issue(reply: FastifyReply, input: { issuingAccount: string; body: CardRequest; effectiveLimit: number; log: FastifyBaseLogger }): Promise<IssuedCard> {
    const { store, clock, connector } = this.deps;
    const requestId = input.body.requestId.toLowerCase();
    const recordKey = `${input.issuingAccount}:${requestId}`;
    const fingerprint = requestFingerprint({ ...input.body, requestId });
    const owner = randomUUID();
    // The claim outlives one full upstream attempt; a gateway that dies holding it is
    // replaced after that (takeover), and the connector's own idempotency covers the rest.
    const leaseMs = connector.timeoutMs + 5000;
    const waitUntil = performance.now() + connector.timeoutMs + 1000;
    let pause = 10;

    for (;;) {
      const reservation = await store.idempotency.reserve(recordKey, { owner, now: clock.now(), leaseMs });
      if (reservation.state === 'completed') {
        return { record: reservation.record, fresh: undefined, replayed: true, payloadMismatch: reservation.record.fingerprint !== fingerprint, recordKey };
      }
      if (reservation.state === 'reserved') break;
      if (performance.now() >= waitUntil) {
        throw errors.idempotencyInProgress(Math.max(1, (reservation.leaseExpiresAt - clock.now()) / 1000));
      }
      await delay(pause);
      pause = Math.min(pause * 2, 100);
    }

    const payload: ConnectorCardRequest = {
      requestId,
      issuingAccount: input.issuingAccount,
      requestedCardLimit: input.body.cardLimit,
      cardLimit: input.effectiveLimit,
      currency: input.body.currency,
      config: input.body.config ?? {},
      metadata: input.body.metadata ?? {},
    };
    const card = await this.#forward(reply, payload, recordKey, input.log, owner);

    const record: StoredCard = {
      fingerprint,
      card: {
        cardId: card.cardId,
        maskedPan: maskPan(card.pan),
        maskedCvc: maskCvc(card.cvc),
        expMonth: card.expMonth,
        expYear: card.expYear,
        status: card.status,
        requestedCardLimit: input.body.cardLimit,
        cardLimit: card.cardLimit,
        currency: card.currency,
        createdAt: card.createdAt,
      },
      sealedSecrets: sealCardSecrets({ pan: card.pan, cvc: card.cvc }, this.deps.cards.encryptionKey, recordKey),
    };
    const now = clock.now();
    try {
      await store.idempotency.complete(recordKey, { owner, record, expiresAt: now + this.deps.cards.idempotencyTtlSeconds * 1000, now });
    } catch (error) {
      // The card exists: give it to the client. A retry reaches the connector with the same
      // Idempotency-Key and gets this card back, so losing the record costs no duplicate.
      input.log.warn({ err: { message: (error as Error).message }, cardId: card.cardId }, 'card created but its idempotency record could not be stored');
    }
    this.deps.metrics.cardsCreated.inc();
    return { record, fresh: { pan: card.pan, cvc: card.cvc }, replayed: false, payloadMismatch: false, recordKey };
  }

  async #forward(reply: FastifyReply, payload: ConnectorCardRequest, recordKey: string, log: FastifyBaseLogger, owner: string) {
    const { connector, metrics, store } = this.deps;
    const started = performance.now();
    try {
      const answer = await forwardToConnector(reply, {
        payload,
        idempotencyKey: recordKey,
        correlationId: reply.request.id,
        timeoutMs: connector.timeoutMs,
        sharedSecret: connector.sharedSecret,
      });
      if (answer.status !== 200 && answer.status !== 201) throw new ConnectorError('status', { status: answer.status });
      const card = parseConnectorCard(answer.body, { cardLimit: payload.cardLimit, currency: payload.currency });
      if (!card) throw new ConnectorError('invalid_answer', { status: answer.status });
      metrics.connectorDuration.observe({ outcome: 'ok' }, (performance.now() - started) / 1000);
      return card;
    } catch (error) {
      const kind = error instanceof ConnectorError ? error.kind : 'error';
      metrics.connectorDuration.observe({ outcome: kind }, (performance.now() - started) / 1000);
      metrics.connectorErrors.inc({ kind });
      log.warn({ connectorFailure: kind, status: (error as { message?: string }).message }, 'card forward failed; idempotency key released');
      try {
        await store.idempotency.release(recordKey, owner);
      } catch {
        // The store is gone too: the claim's lease runs out and the key frees itself.
      }
      throw kind === 'timeout' ? errors.gatewayTimeout(error) : errors.badGateway(error);
    }
  }
}
