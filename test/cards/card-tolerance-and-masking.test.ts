import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLuhnValid } from '../../src/connector/sandbox/luhn.js';
import { metricValue } from '../support/auth-requests.js';
import {
  connectorStats,
  createCard,
  expectCard,
  expectFieldError,
  startCardFixture,
  validCardBody,
  type CardAnswer,
  type CardFixture,
} from '../support/card-fixture.js';

/** D15 (tolerance arithmetic) and D18 (masked by default, revealed only when asked and allowed). */

let fixture: CardFixture;
let token: string;

beforeAll(async () => {
  fixture = await startCardFixture();
  token = await fixture.token('full');
});
afterAll(async () => {
  await fixture.close();
});

const auditEvents = () => fixture.gw.audit.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
const reveals = () => metricValue(fixture.gw, 'gateway_card_reveals_total');

describe('tolerance (D15)', () => {
  const cases: [requested: number, percentage: number, effective: number][] = [
    [10_000, 5, 10_500],
    [999, 10, 1098],
    [1, 100, 2],
    [1, 50, 1],
    [12_345, 0, 12_345],
  ];
  for (const [requested, percentage, effective] of cases) {
    it(`${requested} at ${percentage}% gives ${effective}, echoes ${requested}, and sends ${effective} to the connector`, async () => {
      const card = expectCard(await createCard(fixture.gw, token, validCardBody({ cardLimit: requested, config: { tolerance: { percentage } } })));
      expect(card.cardLimit).toBe(effective);
      expect(card.requestedCardLimit).toBe(requested);
      const { lastBody } = await connectorStats(fixture.connector);
      expect(lastBody).toMatchObject({ cardLimit: effective, requestedCardLimit: requested });
    });
  }

  it('without a tolerance the effective limit is the requested one', async () => {
    const card = expectCard(await createCard(fixture.gw, token, validCardBody({ cardLimit: 777 })));
    expect(card).toMatchObject({ cardLimit: 777, requestedCardLimit: 777 });
  });

  it('refuses MAX_SAFE_INTEGER at 1% on cardLimit, before the connector', async () => {
    const before = (await connectorStats(fixture.connector)).requestsReceived;
    const response = await createCard(fixture.gw, token, validCardBody({ cardLimit: Number.MAX_SAFE_INTEGER, config: { tolerance: { percentage: 1 } } }));
    const body = expectFieldError(response, 'cardLimit', 'with the tolerance applied exceeds the largest supported limit');
    expect(body.details.fields).toHaveLength(1);
    expect((await connectorStats(fixture.connector)).requestsReceived).toBe(before);
  });
});

describe('masking and reveal (D18)', () => {
  const expectMasked = (card: CardAnswer) => {
    expect(card.pan).toMatch(/^\*{12}\d{4}$/);
    expect(card.cvc).toBe('***');
  };
  const expectRevealed = (card: CardAnswer) => {
    expect(card.pan).toMatch(/^400000\d{10}$/);
    expect(isLuhnValid(card.pan)).toBe(true);
    expect(card.cvc).toMatch(/^\d{3}$/);
  };

  it('masks pan (length kept, last four shown) and cvc by default, and a replay reveal shows the same card in full', async () => {
    const body = validCardBody();
    const masked = expectCard(await createCard(fixture.gw, token, body));
    expectMasked(masked);
    const revealed = expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true'));
    expectRevealed(revealed);
    expect(revealed.cardId).toBe(masked.cardId);
    expect(masked.pan).toBe(`************${revealed.pan.slice(-4)}`);
    expect(masked.pan).toHaveLength(revealed.pan.length);
    expect(masked.cvc).toHaveLength(revealed.cvc.length);
    const { cardId: _a, pan: _b, cvc: _c, ...rest } = masked;
    const { cardId: _d, pan: _e, cvc: _f, ...restRevealed } = revealed;
    expect(restRevealed).toEqual(rest);
  });

  it('revealDetails=true on creation returns exactly what the connector issued (checked by a replay reveal), counted and audited', async () => {
    const before = await reveals();
    const body = validCardBody();
    const created = await createCard(fixture.gw, token, body, 'revealDetails=true');
    const first = expectCard(created);
    expectRevealed(first);
    expect(created.headers['idempotent-replayed']).toBeUndefined();
    expect(created.headers['cache-control']).toBe('no-store');
    const replay = await createCard(fixture.gw, token, body, 'revealDetails=true');
    const second = expectCard(replay);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(second).toEqual(first);
    expect(await reveals()).toBe(before + 2);

    const revealedEvents = auditEvents().filter((event) => event['event'] === 'card.revealed' && event['cardId'] === first.cardId);
    expect(revealedEvents).toHaveLength(2);
    expect(revealedEvents.map((event) => event['correlationId'])).toEqual([created.headers['x-correlation-id'], replay.headers['x-correlation-id']]);
    for (const event of revealedEvents) expect(event).toMatchObject({ credential: 'cred-full', outcome: 'success', requestId: body['requestId'] });
    const kinds = auditEvents()
      .filter((event) => event['cardId'] === first.cardId)
      .map((event) => event['event']);
    expect(kinds).toEqual(['card.created', 'card.revealed', 'card.replayed', 'card.revealed']);
  });

  it('revealDetails=false masks, and is neither counted nor audited as a reveal', async () => {
    const before = await reveals();
    const card = expectCard(await createCard(fixture.gw, token, validCardBody(), 'revealDetails=false'));
    expectMasked(card);
    expect(await reveals()).toBe(before);
    expect(
      auditEvents()
        .filter((event) => event['cardId'] === card.cardId)
        .map((event) => event['event']),
    ).toEqual(['card.created']);
  });

  it('a masked replay stays masked', async () => {
    const body = validCardBody();
    const first = expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true'));
    const replay = expectCard(await createCard(fixture.gw, token, body));
    expectMasked(replay);
    expect(replay.pan).toBe(`************${first.pan.slice(-4)}`);
  });

  it('revealDetails=yes is a 400 on the query, and nothing is forwarded', async () => {
    const before = (await connectorStats(fixture.connector)).requestsReceived;
    const revealsBefore = await reveals();
    expectFieldError(await createCard(fixture.gw, token, validCardBody(), 'revealDetails=yes'), 'query.revealDetails');
    expectFieldError(await createCard(fixture.gw, token, validCardBody(), 'revealDetails=TRUE'), 'query.revealDetails');
    expectFieldError(await createCard(fixture.gw, token, validCardBody(), 'revealDetails=1'), 'query.revealDetails');
    expect((await connectorStats(fixture.connector)).requestsReceived).toBe(before);
    expect(await reveals()).toBe(revealsBefore);
  });
});
