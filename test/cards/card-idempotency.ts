import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { metricValue } from '../support/auth-requests.js';
import {
  connectorStats,
  createCard,
  expectCard,
  resetConnector,
  setConnectorMode,
  startCardFixture,
  validCardBody,
  type CardFixture,
} from '../support/card-fixture.js';

export interface IdempotencyStoreHandle {
  store: GatewayStore;
  cleanup(): Promise<void>;
}

const DAY_MS = 86_400_000;

/**
 * D16 and D17 through the HTTP API: status codes and headers of first answers and replays,
 * the payload-mismatch header, the key (issuing account + requestId, letter case ignored) and
 * the 24 h window on the manual clock. Written once, run per store implementation.
 */
export function cardIdempotencySuite(name: string, makeStore: (clock: ManualClock) => Promise<IdempotencyStoreHandle>): void {
  describe(`card idempotency on the ${name} store`, () => {
    const opened: { fixture: CardFixture; cleanup(): Promise<void> }[] = [];

    afterEach(async () => {
      for (const { fixture, cleanup } of opened.splice(0)) {
        try {
          await fixture.close();
        } finally {
          await cleanup();
        }
      }
    });

    async function open(): Promise<CardFixture> {
      const clock = new ManualClock();
      const made = await makeStore(clock);
      try {
        const fixture = await startCardFixture({ store: made.store, clock });
        opened.push({ fixture, cleanup: () => made.cleanup() });
        return fixture;
      } catch (error) {
        await made.cleanup();
        throw error;
      }
    }

    const auditNames = (fixture: CardFixture, cardId: string) =>
      fixture.gw.audit.lines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((event) => event['cardId'] === cardId)
        .map((event) => event['event']);

    it('answers 201 first, then 201 with Idempotent-Replayed: true and the same card, forwarding once', async () => {
      const fixture = await open();
      const token = await fixture.token('full');
      const body = validCardBody({ config: { tolerance: { percentage: 5 } } });

      const first = await createCard(fixture.gw, token, body);
      const card = expectCard(first);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(first.headers['idempotency-payload-mismatch']).toBeUndefined();

      const again = await createCard(fixture.gw, token, body);
      expect(expectCard(again)).toEqual(card);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['idempotency-payload-mismatch']).toBeUndefined();

      const stats = await connectorStats(fixture.connector);
      expect(stats.requestsReceived).toBe(1);
      expect(stats.cardsCreated).toBe(1);
      expect(await metricValue(fixture.gw, 'gateway_cards_created_total')).toBe(1);
      expect(await metricValue(fixture.gw, 'gateway_card_replays_total')).toBe(1);
      expect(auditNames(fixture, card.cardId)).toEqual(['card.created', 'card.replayed']);
    });

    it('a replay with a different payload returns the first card unchanged, flagged Idempotency-Payload-Mismatch', async () => {
      const fixture = await open();
      const token = await fixture.token('full');
      const body = validCardBody({ cardLimit: 10_000 });
      const card = expectCard(await createCard(fixture.gw, token, body));

      const different = await createCard(fixture.gw, token, {
        ...body,
        cardLimit: 99_999,
        currency: 'USD',
        config: { tolerance: { percentage: 50 } },
        metadata: { card_name: 'new' },
      });
      expect(expectCard(different)).toEqual(card);
      expect(card).toMatchObject({ cardLimit: 10_000, requestedCardLimit: 10_000, currency: 'EUR' });
      expect(different.headers['idempotent-replayed']).toBe('true');
      expect(different.headers['idempotency-payload-mismatch']).toBe('true');
      expect((await connectorStats(fixture.connector)).requestsReceived).toBe(1);

      // The stored record was not updated by the mismatching request: the original payload still matches.
      const original = await createCard(fixture.gw, token, body);
      expect(expectCard(original)).toEqual(card);
      expect(original.headers['idempotency-payload-mismatch']).toBeUndefined();
    });

    it('the same payload with its members in another order is not a mismatch', async () => {
      const fixture = await open();
      const token = await fixture.token('full');
      const requestId = randomUUID();
      const body = {
        requestId,
        cardLimit: 5_000,
        currency: 'EUR',
        config: { expiryDuration: 6, tolerance: { percentage: 10 }, allowedCategories: ['a', 'b'] },
        metadata: { card_name: 'n', file_ref: 'f' },
      };
      const card = expectCard(await createCard(fixture.gw, token, body));
      const reordered = {
        metadata: { file_ref: 'f', card_name: 'n' },
        config: { allowedCategories: ['a', 'b'], tolerance: { percentage: 10 }, expiryDuration: 6 },
        currency: 'EUR',
        cardLimit: 5_000,
        requestId,
      };
      const replay = await createCard(fixture.gw, token, reordered);
      expect(expectCard(replay).cardId).toBe(card.cardId);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['idempotency-payload-mismatch']).toBeUndefined();
    });

    it('a requestId differing only in letter case is the same key, written lower-case everywhere', async () => {
      const fixture = await open();
      const token = await fixture.token('full');
      const requestId = randomUUID();
      const card = expectCard(await createCard(fixture.gw, token, validCardBody({ requestId: requestId.toUpperCase() })));
      const stats = await connectorStats(fixture.connector);
      expect(stats.keys).toEqual([`acct-eu:${requestId.toLowerCase()}`]);

      const replay = await createCard(fixture.gw, token, validCardBody({ requestId: requestId.toLowerCase() }));
      expect(expectCard(replay).cardId).toBe(card.cardId);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['idempotency-payload-mismatch']).toBeUndefined();
      expect((await connectorStats(fixture.connector)).requestsReceived).toBe(1);
      // Issue 16: the audit trail writes the one spelling the store and the connector use.
      const audited = fixture.gw.audit.events().filter((event) => event.event === 'card.created' || event.event === 'card.replayed');
      expect(audited.map(({ event, requestId: id }) => ({ event, requestId: id }))).toEqual([
        { event: 'card.created', requestId: requestId.toLowerCase() },
        { event: 'card.replayed', requestId: requestId.toLowerCase() },
      ]);
      expect(fixture.gw.audit.lines.join('\n')).not.toContain(requestId.toUpperCase());
    });

    it('equal requestIds of two issuing accounts make two cards; two credentials of one account share the key', async () => {
      const fixture = await open();
      const requestId = randomUUID();
      const eu = await createCard(fixture.gw, await fixture.token('full'), { requestId, cardLimit: 1_000, currency: 'EUR' });
      const uk = await createCard(fixture.gw, await fixture.token('uk'), { requestId, cardLimit: 2_000, currency: 'GBP' });
      const euCard = expectCard(eu);
      const ukCard = expectCard(uk);
      expect(uk.headers['idempotent-replayed']).toBeUndefined();
      expect(ukCard.cardId).not.toBe(euCard.cardId);
      expect(ukCard).toMatchObject({ currency: 'GBP', cardLimit: 2_000 });
      expect(euCard).toMatchObject({ currency: 'EUR', cardLimit: 1_000 });

      const stats = await connectorStats(fixture.connector);
      expect(stats.cardsCreated).toBe(2);
      expect(stats.keys.sort()).toEqual([`acct-eu:${requestId}`, `acct-uk:${requestId}`]);

      // `create-only` issues on acct-eu too: the same requestId there is a replay of `full`'s card.
      const sameAccount = await createCard(fixture.gw, await fixture.token('create-only'), { requestId, cardLimit: 1_000, currency: 'EUR' });
      expect(expectCard(sameAccount).cardId).toBe(euCard.cardId);
      expect(sameAccount.headers['idempotent-replayed']).toBe('true');
      expect((await connectorStats(fixture.connector)).requestsReceived).toBe(2);
    });

    it('concurrent identical requests on one gateway forward once and all answer the same card', async () => {
      const fixture = await open();
      const token = await fixture.token('full');
      await setConnectorMode(fixture.connector, { mode: 'delay', delayMs: 150 });
      const body = validCardBody();
      const responses = await Promise.all(Array.from({ length: 10 }, () => createCard(fixture.gw, token, body)));
      const cards = responses.map((response) => expectCard(response));
      for (const card of cards) expect(card).toEqual(cards[0]);
      expect(responses.filter((response) => response.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
      const stats = await connectorStats(fixture.connector);
      expect(stats.requestsReceived).toBe(1);
      expect(stats.cardsCreated).toBe(1);
    });

    it('replays until just before 24 h, and creates a new card once 24 h have passed', async () => {
      const fixture = await open();
      const body = validCardBody();
      const card = expectCard(await createCard(fixture.gw, await fixture.token('full'), body));

      fixture.gw.clock.advance(DAY_MS - 1);
      // The first access token expired long ago (1 h): log in again at the new time.
      const replay = await createCard(fixture.gw, await fixture.token('full'), body);
      expect(expectCard(replay).cardId).toBe(card.cardId);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect((await connectorStats(fixture.connector)).requestsReceived).toBe(1);

      // The connector keeps its own key forever; forget it so a new forward makes a new card.
      await resetConnector(fixture.connector);
      fixture.gw.clock.advance(1);
      const fresh = await createCard(fixture.gw, await fixture.token('full'), body);
      const freshCard = expectCard(fresh);
      expect(fresh.headers['idempotent-replayed']).toBeUndefined();
      expect(freshCard.cardId).not.toBe(card.cardId);
      const stats = await connectorStats(fixture.connector);
      expect(stats.requestsReceived).toBe(1);
      expect(stats.cardsCreated).toBe(1);
      expect(stats.keys).toEqual([`acct-eu:${String(body['requestId'])}`]);

      // And the new card is the one replayed from now on.
      const replayOfFresh = await createCard(fixture.gw, await fixture.token('full'), body);
      expect(expectCard(replayOfFresh).cardId).toBe(freshCard.cardId);
      expect(replayOfFresh.headers['idempotent-replayed']).toBe('true');
    });
  });
}
