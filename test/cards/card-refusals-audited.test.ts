import { afterEach, describe, expect, it } from 'vitest';
import { metricValue, MINUTE } from '../support/auth-requests.js';
import { createCard, setConnectorMode, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { expectContractError } from '../support/envelope.js';
import { auditEvents, CARD, LIFECYCLE_CREDENTIALS, startLifecycleFixture, type LifecycleFixture } from '../support/lifecycle-fixture.js';

/**
 * D60, issue 31 findings 7 and 8. Probing another account's card ids left no audit line (only an
 * unlabelled counter); now 404 card_not_found, 409 card_canceled, a cursor refusal and a
 * permission refusal on a card route are audited per credential and minute, with the route and
 * the ids as the client sent them (card numbers masked, D58). And a connector 4xx about an id the
 * client chose (the sandbox's router answered 414 for ids of 101-128 characters) is
 * card_not_found, not a connector error that can fire the connector alerts.
 */

const READ = 'GET /api/v1/issuing/cards/:cardId';
const CHANGE = 'PATCH /api/v1/issuing/cards/:cardId';
const LIST = 'GET /api/v1/issuing/cards';

describe('refusals of card routes are audited per credential and minute (D60)', () => {
  let f: LifecycleFixture | undefined;
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  const summaries = (fixture: LifecycleFixture) => auditEvents(fixture).filter((event) => event['event'] === 'card.refused');

  it('summarises each (credential, reason, route) of a window in one line: the count, the ids as sent, card numbers masked', async () => {
    f = await startLifecycleFixture();
    const life = await f.token('life');
    const foreign = await f.create(await f.token('life-uk'), validCardBody({ currency: 'GBP' }));
    const canceled = await f.create(life);
    expect((await f.patch(life, canceled, { status: 'canceled' })).statusCode).toBe(200);
    const long = `card_${'z'.repeat(5000)}`;
    const probes = ['card_unknown', foreign, 'card 4111 1111 1111 1111', long, 'card_unknown'];
    for (const cardId of probes) expectContractError(await f.get(life, cardId), 404, 'card_not_found', 'Card not found');
    expectContractError(await f.patch(life, foreign, { status: 'inactive' }), 404, 'card_not_found', 'Card not found');
    expectContractError(await f.patch(life, canceled, { status: 'active' }), 409, 'card_canceled', 'The card is canceled; its status cannot change');
    expectContractError(await f.list(life, 'cursor=c1.x.y.z'), 400, 'invalid_cursor', 'The cursor is not valid for this listing');
    expectContractError(await f.get(await f.token('updater'), canceled), 403, 'permission_denied', 'Permission cards:read is required');
    // Nothing is written while the window is open; its end writes the summaries.
    expect(summaries(f)).toEqual([]);
    f.clock.advance(MINUTE);
    f.gw.gateway.flushAudit();

    const lines = summaries(f);
    const byKey = new Map(lines.map((line) => [`${String(line['credential'])} ${String(line['reason'])} ${String(line['route'])}`, line]));
    expect(lines).toHaveLength(5);
    expect(byKey.get(`cred-life card_not_found ${READ}`)).toMatchObject({
      outcome: 'denied',
      count: 5,
      // Distinct ids, in order; a card number masked; a 5,000-character id cut to 128 characters.
      cardIds: ['card_unknown', foreign, 'card **** **** **** 1111', `${long.slice(0, 128)}…`],
      windowStart: expect.any(String) as unknown as string,
      windowEnd: expect.any(String) as unknown as string,
    });
    expect(byKey.get(`cred-life card_not_found ${CHANGE}`)).toMatchObject({ count: 1, cardIds: [foreign] });
    expect(byKey.get(`cred-life card_canceled ${CHANGE}`)).toMatchObject({ count: 1, cardIds: [canceled] });
    expect(byKey.get(`cred-life invalid_cursor ${LIST}`)).toMatchObject({ count: 1 });
    expect(byKey.get(`cred-life invalid_cursor ${LIST}`)?.['cardIds']).toBeUndefined();
    expect(byKey.get(`cred-updater permission_denied ${READ}`)).toMatchObject({ count: 1, cardIds: [canceled] });
    expect(f.gw.audit.lines.join('\n')).not.toContain('4111 1111 1111 1111');
    expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'read', outcome: 'card_not_found' })).toBe(5);
  });

  it('a probe of many ids is one line a minute with the count and at most 20 ids; the next minute starts another', async () => {
    f = await startLifecycleFixture();
    const life = await f.token('life');
    for (let i = 0; i < 50; i += 1) expect((await f.get(life, `card_${String(i).padStart(4, '0')}`)).statusCode).toBe(404);
    f.clock.advance(MINUTE);
    expect((await f.get(life, 'card_next_minute')).statusCode).toBe(404);
    f.gw.gateway.flushAudit();
    const lines = summaries(f);
    expect(lines.map((line) => [line['count'], (line['cardIds'] as string[]).length])).toEqual([
      [50, 20],
      [1, 1],
    ]);
    expect((lines[0]!['cardIds'] as string[])[19]).toBe('card_0019');
    expect(lines[1]!['cardIds']).toEqual(['card_next_minute']);
  });

  it('keeps a reveal by another credential audited on its own line, as before', async () => {
    f = await startLifecycleFixture();
    const cardId = await f.create(await f.token('life'));
    expect((await f.get(await f.token('peer'), cardId, 'revealDetails=true')).statusCode).toBe(403);
    expect(auditEvents(f).filter((event) => event['event'] === 'access.denied')).toEqual([
      expect.objectContaining({ reason: 'reveal_not_creator', credential: 'cred-peer', cardId }),
    ]);
  });
});

describe('a connector 4xx about the id the client chose is card_not_found, not a connector error (D60)', () => {
  let fixture: CardFixture | undefined;
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });

  it('ids of 101 to 128 characters reach the sandbox and are not found; a 414 or 400 from a connector is not found either; a 503 stays a 502', async () => {
    fixture = await startCardFixture({ credentials: LIFECYCLE_CREDENTIALS });
    const token = await fixture.token('life');
    const get = (cardId: string) => fixture!.gw.inject({ method: 'GET', url: CARD(cardId), headers: { authorization: `Bearer ${token}` } });
    const patch = (cardId: string) =>
      fixture!.gw.inject({
        method: 'PATCH',
        url: CARD(cardId),
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: { status: 'inactive' },
      });
    for (const length of [100, 101, 128]) {
      expectContractError(await get('c'.repeat(length)), 404, 'card_not_found', 'Card not found');
      expectContractError(await patch('c'.repeat(length)), 404, 'card_not_found', 'Card not found');
    }
    for (const status of [414, 400]) {
      await setConnectorMode(fixture.connector, { mode: 'fail', status, count: 2 });
      expectContractError(await get('card_anything'), 404, 'card_not_found', 'Card not found');
      expectContractError(await patch('card_anything'), 404, 'card_not_found', 'Card not found');
    }
    expect(await metricValue(fixture.gw, 'gateway_connector_errors_total')).toBe(0);
    expect(await metricValue(fixture.gw, 'gateway_connector_request_duration_seconds_count', { operation: 'get', outcome: 'ok' })).toBe(5);
    // A connector that fails is still a failure, counted under the call it failed.
    await setConnectorMode(fixture.connector, { mode: 'fail', status: 503, count: 1 });
    expect((await get('card_anything')).statusCode).toBe(502);
    expect(await metricValue(fixture.gw, 'gateway_connector_errors_total', { operation: 'get', kind: 'status' })).toBe(1);
    expect(await metricValue(fixture.gw, 'gateway_connector_errors_total', { operation: 'create' })).toBe(0);
    // Creation is counted on its own.
    expect((await createCard(fixture.gw, token, validCardBody())).statusCode).toBe(201);
    expect(await metricValue(fixture.gw, 'gateway_connector_request_duration_seconds_count', { operation: 'create' })).toBe(1);
  });
});
