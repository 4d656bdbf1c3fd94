import { randomUUID } from 'node:crypto';
import { NO_CARD_EVENTS } from '../../src/cards/card-events.js';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { NOT_CREATOR } from '../../src/cards/card-access.js';
import type { CardRequest } from '../../src/cards/card-schemas.js';
import { CardCursorSealer } from '../../src/cards/card-cursor.js';
import { CardSealer } from '../../src/cards/card-sealing.js';
import { cardCreation, type CardResult, type CreateCard } from '../../src/cards/create-card.js';
import { LiveSettings } from '../../src/config/live-settings.js';
import type { GatewayConfig } from '../../src/config/load-config.js';
import { ConnectorError, type ConnectorCardRequest, type ConnectorClient, type ConnectorReply } from '../../src/connector/connector-port.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { GatewayError, type ErrorCode } from '../../src/foundation/errors.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { OutcomeRecorder, type Outcome } from '../../src/observability/outcomes.js';
import { PendingRecords } from '../../src/cards/pending-records.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { LogCapture, testConfig } from '../support/config-fixture.js';

/**
 * The card use case (idempotent issue, reveal, opening sealed secrets) on its real
 * collaborators, wired as src/app.ts wires them, with the connector port implemented here so
 * that what reaches the processor can be counted. No HTTP server, no sandbox connector.
 */

const PAN = '4000001234567899';
const CVC = '123';
const context = { correlationId: 'corr-card-test', clientAddress: '127.0.0.1' };

/** The connector port, in memory: records every forward and answers what `answer` says. */
class RecordingConnector implements ConnectorClient {
  readonly forwards: { payload: ConnectorCardRequest; idempotencyKey: string }[] = [];
  /** The default answers as the contract's processor does: a new card for the effective limit. */
  answer: (payload: ConnectorCardRequest) => Promise<ConnectorReply> = async (payload) => ({
    card: {
      cardId: `card-${this.forwards.length}`,
      pan: PAN,
      cvc: CVC,
      expMonth: 11,
      expYear: 2029,
      status: 'active',
      cardLimit: payload.cardLimit,
      currency: payload.currency,
      createdAt: '2026-11-22T12:00:00.000Z',
    },
    replayed: false,
  });

  async createCard(payload: ConnectorCardRequest, meta: { idempotencyKey: string; correlationId: string }): Promise<ConnectorReply> {
    this.forwards.push({ payload, idempotencyKey: meta.idempotencyKey });
    return this.answer(payload);
  }
  async getCard(): Promise<null> {
    return null;
  }
  async listCards(): Promise<{ data: []; nextCursor: null }> {
    return { data: [], nextCursor: null };
  }
  async setCardStatus(): Promise<{ outcome: 'not_found' }> {
    return { outcome: 'not_found' };
  }
  async health(): Promise<void> {}
  poolLoad() {
    return { inFlight: 0, queued: 0 };
  }
  async close(): Promise<void> {}
}

let config: GatewayConfig;

beforeAll(async () => {
  config = await testConfig();
});

interface Harness {
  createCard: CreateCard;
  connector: RecordingConnector;
  store: MemoryStore;
  outcomes: () => Outcome[];
}

let harness: Harness;

beforeEach(() => {
  const clock = new ManualClock();
  const store = new MemoryStore(() => clock.now());
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const outcomes = new OutcomeRecorder(metrics, new MemoryAuditSink(clock), new LogCapture().logger);
  const record = vi.spyOn(outcomes, 'record');
  const connector = new RecordingConnector();
  const sealer = new CardSealer(config.cards.encryptionKey, config.cards.previousEncryptionKeys);
  const cursors = new CardCursorSealer(config.cards.encryptionKey, config.cards.previousEncryptionKeys);
  harness = {
    createCard: cardCreation({
      store,
      clock,
      connector,
      outcomes,
      sealer,
      cursors,
      live: new LiveSettings(config),
      pendingRecords: new PendingRecords(),
      settings: config,
      events: NO_CARD_EVENTS,
    }),
    connector,
    store,
    outcomes: () => record.mock.calls.map(([outcome]) => outcome),
  };
});

afterEach(async () => {
  await harness.store.close();
});

const body = (overrides: Partial<CardRequest> = {}): CardRequest => ({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR', ...overrides });

function create(request: CardRequest, options: { credential?: string; reveal?: boolean } = {}): Promise<CardResult> {
  // The bearer guard resolves the credential before the route calls the service; here the config does.
  const credential = config.credentials.byId(options.credential ?? 'cred-full')!;
  return harness.createCard({ ...context, credential, body: request, reveal: options.reveal ?? false });
}

/** Refusals are catalogue errors, the only kind the edge renders with their code. */
async function expectRefused(promise: Promise<unknown>, code: ErrorCode, message?: string): Promise<void> {
  await expect(promise).rejects.toBeInstanceOf(GatewayError);
  await expect(promise).rejects.toMatchObject({ code, ...(message !== undefined && { message }) });
}

describe('issue', () => {
  it('forwards a first request once and answers the card, masked', async () => {
    const request = body();
    const result = await create(request);

    expect(harness.connector.forwards).toHaveLength(1);
    expect(harness.connector.forwards[0]).toEqual({
      payload: {
        requestId: request.requestId,
        issuingAccount: 'acct-eu',
        requestedCardLimit: 10_000,
        cardLimit: 10_000,
        currency: 'EUR',
        config: {},
        metadata: {},
      },
      idempotencyKey: `acct-eu:${request.requestId}`,
    });
    expect(result).toEqual({
      card: {
        cardId: 'card-1',
        pan: '************7899',
        cvc: '***',
        expMonth: 11,
        expYear: 2029,
        status: 'active',
        requestedCardLimit: 10_000,
        cardLimit: 10_000,
        currency: 'EUR',
        createdAt: '2026-11-22T12:00:00.000Z',
      },
      replayed: false,
      payloadMismatch: false,
    });
    expect(harness.outcomes()).toEqual([
      { name: 'card.created', credential: 'cred-full', requestId: request.requestId, cardId: 'card-1', connectorReplay: false },
    ]);
  });

  it('replays the same requestId from the record without forwarding again', async () => {
    const request = body();
    const first = await create(request);
    const again = await create({ ...request });

    expect(harness.connector.forwards).toHaveLength(1);
    expect(again).toEqual({ card: first.card, replayed: true, payloadMismatch: false });
    expect(harness.outcomes().at(-1)).toEqual({
      name: 'card.replayed',
      credential: 'cred-full',
      requestId: request.requestId,
      cardId: 'card-1',
      payloadMismatch: false,
    });
  });

  it('answers the first card, flagged as a payload mismatch, when the same requestId comes with another payload', async () => {
    const request = body();
    const first = await create(request);
    const changed = await create({ ...request, cardLimit: 20_000 });

    expect(harness.connector.forwards).toHaveLength(1);
    expect(changed).toEqual({ card: first.card, replayed: true, payloadMismatch: true });
    expect(changed.card.cardLimit).toBe(10_000);
    expect(harness.outcomes().at(-1)).toMatchObject({ name: 'card.replayed', payloadMismatch: true });
  });

  it('refuses a currency the account has not enabled before anything is forwarded', async () => {
    await expectRefused(create(body({ currency: 'GBP' })), 'validation_failed');
    expect(harness.connector.forwards).toHaveLength(0);
  });

  it('releases the key when the forward fails, so the retry forwards again under the same key', async () => {
    const request = body();
    const answer = harness.connector.answer;
    harness.connector.answer = async () => {
      throw new ConnectorError('reset');
    };
    await expectRefused(create(request), 'connector_unavailable');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'card.failed', credential: 'cred-full', requestId: request.requestId, reason: 'reset' });

    harness.connector.answer = answer;
    await create(request);
    expect(harness.connector.forwards.map((forward) => forward.idempotencyKey)).toEqual([`acct-eu:${request.requestId}`, `acct-eu:${request.requestId}`]);
  });
});

describe('reveal', () => {
  it('answers the creator the PAN and CVC, on the first issue and on a replay (opened from the sealed record)', async () => {
    const request = body();
    const first = await create(request, { reveal: true });
    const replay = await create(request, { reveal: true });

    expect(harness.connector.forwards).toHaveLength(1);
    for (const result of [first, replay]) expect(result.card).toMatchObject({ pan: PAN, cvc: CVC });
    // What the store keeps is sealed: the plaintext exists only in the answers.
    expect(JSON.stringify([...harness.store.idempotency.records.values()])).not.toContain(PAN);
  });

  it('refuses to reveal to a credential other than the creator, even in the same issuing account', async () => {
    const request = body();
    await create(request, { credential: 'cred-create' });

    await expectRefused(create(request, { credential: 'cred-full', reveal: true }), 'permission_denied', NOT_CREATOR);
    expect(harness.outcomes().at(-1)).toEqual({
      name: 'access.denied',
      credential: 'cred-full',
      reason: 'reveal_not_creator',
      requestId: request.requestId,
      cardId: 'card-1',
    });
    // Without reveal the other credential gets the masked replay: only the secrets are the creator's.
    expect((await create(request, { credential: 'cred-full' })).card.pan).toBe('************7899');
    expect(harness.connector.forwards).toHaveLength(1);
  });

  it("refuses to reveal the connector's replay of a card another credential's failed attempt made", async () => {
    const request = body();
    const answer = harness.connector.answer;
    // The processor made the card but the answer was lost: the gateway saw a timeout.
    harness.connector.answer = async () => {
      throw new ConnectorError('timeout');
    };
    await expectRefused(create(request, { credential: 'cred-create' }), 'connector_timeout');

    harness.connector.answer = async (payload) => ({ ...(await answer(payload)), replayed: true });
    await expectRefused(create(request, { credential: 'cred-full', reveal: true }), 'permission_denied', NOT_CREATOR);
    expect(harness.connector.forwards).toHaveLength(2);
  });

  it('refuses reveal to a credential without cards:reveal before anything is forwarded', async () => {
    await expectRefused(create(body(), { credential: 'cred-create', reveal: true }), 'permission_denied');
    expect(harness.connector.forwards).toHaveLength(0);
  });
});
