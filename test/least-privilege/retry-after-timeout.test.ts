import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectorStats, createCard, expectCard, expectError, setConnectorMode, startCardFixture, type CardFixture } from '../support/card-fixture.js';
import { expectContractError } from './contract-helpers.js';

/**
 * Issue 9 row 3 (D31): a creation that times out (504) made the card at the connector anyway. The
 * client's retry with the same requestId but another cardLimit reaches the connector, which
 * replays the card it made (200): the gateway answers 201 with that ORIGINAL card and
 * `Idempotency-Payload-Mismatch: true`, stores it, and later replays answer the same card. The
 * connector holds one card.
 */

const TIMEOUT_MS = 800;

describe('retrying after an ambiguous timeout (D31)', () => {
  let f: CardFixture;
  let token: string;

  beforeAll(async () => {
    f = await startCardFixture({ connectorTimeoutMs: TIMEOUT_MS });
    token = await f.token('full');
  });
  afterAll(async () => {
    await f?.close();
  });

  it('answers a retry with another cardLimit with the card the connector made during the 504, and keeps answering it', async () => {
    const requestId = randomUUID();
    const first = { requestId, cardLimit: 10_000, currency: 'EUR' };
    const retry = { requestId, cardLimit: 25_000, currency: 'EUR' };
    const before = await connectorStats(f.connector);

    // The connector makes the card, then answers long after the gateway's deadline.
    await setConnectorMode(f.connector, { mode: 'delay', delayMs: TIMEOUT_MS * 5, count: 1 });
    const timedOut = await createCard(f.gw, token, first);
    expectError(timedOut, 504, 'Card processor did not answer in time');
    const afterTimeout = await connectorStats(f.connector);
    expect(afterTimeout.cardsCreated).toBe(before.cardsCreated + 1);

    const retried = await createCard(f.gw, token, retry);
    const card = expectCard(retried);
    expect(retried.headers['idempotency-payload-mismatch']).toBe('true');
    // The original card: the limit the connector made it with, not the retry's.
    expect(card.cardLimit).toBe(10_000);
    expect(card.currency).toBe('EUR');
    expect(card.pan).toMatch(/^\*{12}\d{4}$/);
    expect(card.cvc).toMatch(/^\*+$/);
    const afterRetry = await connectorStats(f.connector);
    // The retry reached the connector with the same key and got its replay; no second card.
    expect(afterRetry.cardsCreated).toBe(before.cardsCreated + 1);
    expect(afterRetry.received.at(-1)?.headers['idempotency-key']).toBe(`acct-eu:${requestId}`);

    // Later replays (either payload) answer that same card.
    for (const body of [retry, first]) {
      const replay = expectCard(await createCard(f.gw, token, body));
      expect(replay).toEqual(card);
    }
    const mismatch = await createCard(f.gw, token, retry);
    expect(expectCard(mismatch).cardId).toBe(card.cardId);
    expect(mismatch.headers['idempotency-payload-mismatch']).toBe('true');
    expect((await connectorStats(f.connector)).cardsCreated).toBe(before.cardsCreated + 1);
    // The envelope's new `code` (checked last: the old code lacks it, and the row is about the retry).
    expectContractError(timedOut, 504, 'connector_timeout', 'Card processor did not answer in time');
  });
});
