import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayEvent } from '../../src/foundation/event-types.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { createCard } from '../support/card-fixture.js';
import { startLifecycleFixture, type LifecycleFixture } from '../support/lifecycle-fixture.js';

const EVENTS = '/api/v1/issuing/events';
const DAY = 24 * 3600 * 1000;

let fixture: LifecycleFixture;
afterEach(async () => fixture?.close());

type Page = { data: GatewayEvent[]; nextCursor: string | null };

async function read(token: string, query = ''): Promise<{ status: number; page: Page; body: string }> {
  const response = await fixture.gw.inject({ method: 'GET', url: query ? `${EVENTS}?${query}` : EVENTS, headers: { authorization: `Bearer ${token}` } });
  return { status: response.statusCode, page: (response.statusCode === 200 ? response.json() : { data: [], nextCursor: null }) as Page, body: response.body };
}

describe('events recorded by the gateway and read back (D63, D64, D66)', () => {
  it('records card.created and card.status_changed (source api) and lists them newest first, masked', async () => {
    fixture = await startLifecycleFixture();
    const life = await fixture.token('life');
    const reader = await fixture.token('events');
    const createdAnswer = await createCard(
      fixture.gw,
      life,
      { requestId: '5d0f6a3e-7a52-4b11-9c3e-1f0a2b3c4d5e', cardLimit: 10_000, currency: 'EUR', metadata: { trip: 'Lisbon' } },
      'revealDetails=true',
    );
    expect(createdAnswer.statusCode).toBe(201);
    const { cardId, pan, cvc } = createdAnswer.json<{ cardId: string; pan: string; cvc: string }>();
    expect((await fixture.patch(life, cardId, { status: 'inactive', reason: 'lost phone' })).statusCode).toBe(200);

    const { status, page } = await read(reader);
    expect(status).toBe(200);
    expect(page.data.map((event) => event.type)).toEqual(['card.status_changed', 'card.created']);
    const [changed, created] = page.data as [Extract<GatewayEvent, { type: 'card.status_changed' }>, Extract<GatewayEvent, { type: 'card.created' }>];
    expect(created.sequence).toBe(1);
    expect(changed.sequence).toBe(2);
    expect(created.issuingAccount).toBe('acct-eu');
    expect(created.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(created.data.card).toMatchObject({ cardId, status: 'active', requestId: '5d0f6a3e-7a52-4b11-9c3e-1f0a2b3c4d5e', metadata: { trip: 'Lisbon' } });
    expect(created.data.card.pan).toMatch(/^\*+\d{4}$/);
    expect(created.data.card.cvc).toMatch(/^\*+$/);
    expect(changed.data).toMatchObject({ previousStatus: 'active', status: 'inactive', reason: 'lost phone', source: 'api', credentialId: 'cred-life' });
    expect(changed.data.card.status).toBe('inactive');
    expect(page.nextCursor).toBeNull();

    const one = await fixture.gw.inject({ method: 'GET', url: `${EVENTS}/${created.id}`, headers: { authorization: `Bearer ${reader}` } });
    expect(one.statusCode).toBe(200);
    expect(one.headers['cache-control']).toBe('no-store');
    expect(one.json()).toEqual(created);

    // No full card number anywhere the gateway keeps events.
    expect(pan).toMatch(/^\d{16}$/);
    const kept = (await fixture.gw.store.events.scan('acct-eu', { limit: 100 })).map((event) => event.json).join('\n');
    expect(kept).not.toContain(pan);
    expect(kept).not.toContain(`"cvc":"${cvc}"`);
  });

  it('records no event for a status change that changed nothing', async () => {
    fixture = await startLifecycleFixture();
    const life = await fixture.token('life');
    const cardId = await fixture.create(life);
    expect((await fixture.patch(life, cardId, { status: 'active' })).statusCode).toBe(200);
    const { page } = await read(await fixture.token('events'));
    expect(page.data.map((event) => event.type)).toEqual(['card.created']);
  });

  it('needs events:read, which no card permission implies', async () => {
    fixture = await startLifecycleFixture();
    const denied = await read(await fixture.token('life'));
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body)).toMatchObject({ code: 'permission_denied', message: 'Permission events:read is required' });
    expect((await read(await fixture.token('events'))).status).toBe(200);
  });

  it("answers another account's event exactly like an unknown or malformed id", async () => {
    fixture = await startLifecycleFixture();
    await fixture.create(await fixture.token('life'));
    const [event] = (await read(await fixture.token('events'))).page.data;
    const uk = await fixture.token('events-uk');
    expect((await read(uk)).page.data).toEqual([]);
    const answers = await Promise.all(
      [event!.id, 'evt_00000000000000000000000000', 'not-an-id', `${event!.id}x`].map((id) =>
        fixture.gw.inject({ method: 'GET', url: `${EVENTS}/${encodeURIComponent(id)}`, headers: { authorization: `Bearer ${uk}` } }),
      ),
    );
    for (const answer of answers) {
      expect(answer.statusCode).toBe(404);
      expect(answer.json()).toMatchObject({ code: 'event_not_found' });
    }
  });

  it('filters by type and card, pages with sealed cursors bound to the filters', async () => {
    fixture = await startLifecycleFixture();
    const life = await fixture.token('life');
    const reader = await fixture.token('events');
    const first = await fixture.create(life);
    const second = await fixture.create(life);
    await fixture.patch(life, first, { status: 'inactive' });

    expect((await read(reader, 'type=card.created')).page.data.map((event) => (event.data as { card: { cardId: string } }).card.cardId)).toEqual([
      second,
      first,
    ]);
    expect((await read(reader, `cardId=${first}`)).page.data.map((event) => event.type)).toEqual(['card.status_changed', 'card.created']);

    const one = await read(reader, 'limit=1');
    expect(one.page.data).toHaveLength(1);
    expect(one.page.data[0]!.sequence).toBe(3);
    const cursor = one.page.nextCursor!;
    expect(cursor).toEqual(expect.any(String));
    const two = await read(reader, `limit=2&cursor=${encodeURIComponent(cursor)}`);
    expect(two.page.data.map((event) => event.sequence)).toEqual([2, 1]);

    // The cursor opens only with the filters it was made for, and only unaltered.
    const otherFilter = await read(reader, `limit=1&type=card.created&cursor=${encodeURIComponent(cursor)}`);
    expect(otherFilter.status).toBe(400);
    expect(JSON.parse(otherFilter.body)).toMatchObject({ code: 'invalid_cursor' });
    // One character changed (the one before the last: every bit of it is sealed data).
    const altered = `${cursor.slice(0, -2)}${cursor.at(-2) === 'A' ? 'B' : 'A'}${cursor.slice(-1)}`;
    expect(altered).not.toBe(cursor);
    expect((await read(reader, `limit=1&cursor=${encodeURIComponent(altered)}`)).status).toBe(400);
    expect((await read(await fixture.token('events-uk'), `limit=1&cursor=${encodeURIComponent(cursor)}`)).status).toBe(400);
  });

  it('refuses bad filters with precise problems', async () => {
    fixture = await startLifecycleFixture();
    const reader = await fixture.token('events');
    const reversed = await read(reader, 'createdAfter=2026-11-23T00:00:00Z&createdBefore=2026-11-22T00:00:00Z');
    expect(reversed.status).toBe(400);
    expect(JSON.parse(reversed.body)).toMatchObject({
      code: 'validation_failed',
      details: { fields: [{ path: 'query.createdAfter', message: 'must not be later than createdBefore' }] },
    });
    expect((await read(reader, 'type=card.frozen')).status).toBe(400);
    expect((await read(reader, 'limit=101')).status).toBe(400);
    expect((await read(reader, 'limit=100')).status).toBe(200);
  });

  it('keeps events for the retention period by the injected clock: readable just inside, gone just outside', async () => {
    fixture = await startLifecycleFixture({ overrides: { events: { retentionDays: 2 } } });
    await fixture.create(await fixture.token('life'));
    const [event] = (await read(await fixture.token('events'))).page.data;
    fixture.clock.advance(2 * DAY - 1);
    const reader = await fixture.token('events');
    expect((await read(reader)).page.data).toHaveLength(1);
    expect((await fixture.gw.inject({ method: 'GET', url: `${EVENTS}/${event!.id}`, headers: { authorization: `Bearer ${reader}` } })).statusCode).toBe(200);
    fixture.clock.advance(2);
    const later = await fixture.token('events');
    expect((await read(later)).page.data).toEqual([]);
    expect((await fixture.gw.inject({ method: 'GET', url: `${EVENTS}/${event!.id}`, headers: { authorization: `Bearer ${later}` } })).statusCode).toBe(404);
  });

  it('records nothing with events disabled', async () => {
    const store = new MemoryStore(() => Date.now());
    fixture = await startLifecycleFixture({ store, overrides: { events: { enabled: false } } });
    await fixture.create(await fixture.token('life'));
    expect(await store.events.scan('acct-eu', { limit: 10 })).toEqual([]);
    expect((await read(await fixture.token('events'))).page.data).toEqual([]);
    await store.close();
  });
});
