import { afterEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { metricValue, MINUTE } from '../support/auth-requests.js';
import { createCard, validCardBody } from '../support/card-fixture.js';
import { expectContractError, expectContractFieldError } from '../support/envelope.js';
import { auditEvents, startLifecycleFixture, type LifecycleFixture } from '../support/lifecycle-fixture.js';

export interface LifecycleStoreHandle {
  store: GatewayStore;
  cleanup(): Promise<void>;
}

const DAY = 24 * 60 * MINUTE;
const MASKED_PAN = /^\*{12}\d{4}$/;

/**
 * D43-D48 through the HTTP API, every rule at its boundary, on the in-memory connector port.
 * Written once, run per store implementation (the reveal rule reads creation's record there,
 * the limits count there).
 */
export function cardLifecycleSuite(name: string, makeStore: (clock: ManualClock | undefined) => Promise<LifecycleStoreHandle>): void {
  describe(`card lifecycle on the ${name} store`, () => {
    const opened: { fixture: LifecycleFixture; cleanup(): Promise<void> }[] = [];
    afterEach(async () => {
      for (const { fixture, cleanup } of opened.splice(0)) {
        try {
          await fixture.close();
        } finally {
          await cleanup();
        }
      }
    });
    async function open(overrides?: Record<string, unknown>): Promise<LifecycleFixture> {
      const made = await makeStore(undefined);
      try {
        const fixture = await startLifecycleFixture({ store: made.store, ...(overrides && { overrides }) });
        opened.push({ fixture, cleanup: () => made.cleanup() });
        return fixture;
      } catch (error) {
        await made.cleanup();
        throw error;
      }
    }

    describe('reading one card (D43)', () => {
      it('answers the card masked, with its requestId and metadata, and its status now', async () => {
        const f = await open();
        const life = await f.token('life');
        const body = validCardBody({ metadata: { card_name: 'Lisbon' } });
        const cardId = await f.create(life, body);
        const response = await f.get(life, cardId);
        expect(response.statusCode, response.body).toBe(200);
        expect(response.headers['cache-control']).toBe('no-store');
        const card = response.json<Record<string, unknown>>();
        expect(card).toMatchObject({ cardId, status: 'active', requestId: String(body['requestId']), metadata: { card_name: 'Lisbon' }, cvc: '***' });
        expect(card['pan']).toMatch(MASKED_PAN);
        expect((await f.patch(life, cardId, { status: 'inactive' })).statusCode).toBe(200);
        expect((await f.get(await f.token('reader'), cardId)).json<{ status: string }>().status).toBe('inactive');
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'read', outcome: 'ok' })).toBe(2);
        expect(await metricValue(f.gw, 'gateway_connector_call_duration_seconds_count', { operation: 'get' })).toBe(2);
        expect(await metricValue(f.gw, 'gateway_connector_call_duration_seconds_count', { operation: 'status' })).toBe(1);
      });

      it('needs cards:read, which no other permission implies (D47): 403 before the connector is asked', async () => {
        const f = await open();
        const cardId = await f.create(await f.token('life'));
        for (const username of ['full', 'updater']) {
          expectContractError(await f.get(await f.token(username), cardId), 403, 'permission_denied', 'Permission cards:read is required');
          expectContractError(await f.list(await f.token(username)), 403, 'permission_denied', 'Permission cards:read is required');
        }
        expectContractError(
          await f.patch(await f.token('reader'), cardId, { status: 'inactive' }),
          403,
          'permission_denied',
          'Permission cards:update is required',
        );
        expect(f.connector.calls.get).toEqual([]);
        expect(f.connector.calls.list).toEqual([]);
      });

      it('reveals to the creating credential with cards:reveal, audited; refuses another credential of the same account', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const revealed = await f.get(life, cardId, 'revealDetails=true');
        expect(revealed.statusCode, revealed.body).toBe(200);
        expect(revealed.json<{ pan: string; cvc: string }>().pan).toMatch(/^\d{16}$/);
        expect(revealed.json<{ cvc: string }>().cvc).toMatch(/^\d{3}$/);
        const revealedPan = revealed.json<{ pan: string }>().pan;
        expect(f.gw.logs.text()).not.toContain(revealedPan);
        expect(f.gw.audit.lines.join('\n')).not.toContain(revealedPan);
        expect(await metricValue(f.gw, 'gateway_card_reveals_total')).toBe(1);
        const correlationId = revealed.headers['x-correlation-id'];
        expect(auditEvents(f).filter((event) => event['correlationId'] === correlationId)).toEqual([
          expect.objectContaining({ event: 'card.revealed', credential: 'cred-life', cardId }),
        ]);

        const peer = expectContractError(
          await f.get(await f.token('peer'), cardId, 'revealDetails=true'),
          403,
          'permission_denied',
          'Only the credential that created this card can reveal its details',
        );
        expect(auditEvents(f).filter((event) => event['correlationId'] === peer.correlationId)).toEqual([
          expect.objectContaining({ event: 'access.denied', reason: 'reveal_not_creator', credential: 'cred-peer', cardId }),
        ]);
        expectContractError(
          await f.get(await f.token('reader'), cardId, 'revealDetails=true'),
          403,
          'permission_denied',
          'Permission cards:reveal is required for revealDetails=true',
        );
        expect((await f.get(await f.token('peer'), cardId, 'revealDetails=false')).json<{ pan: string }>().pan).toMatch(MASKED_PAN);
        expectContractFieldError(await f.get(life, cardId, 'revealDetails=yes'), 'query.revealDetails', expect.any(String) as unknown as string);
      });

      it("reveals while creation's record is kept (24 h), to nobody after it", async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        f.clock.advance(DAY - 1000);
        expect((await f.get(await f.token('life'), cardId, 'revealDetails=true')).statusCode).toBe(200);
        f.clock.advance(1000);
        expectContractError(
          await f.get(await f.token('life'), cardId, 'revealDetails=true'),
          403,
          'permission_denied',
          'Only the credential that created this card can reveal its details',
        );
        expect((await f.get(await f.token('life'), cardId)).statusCode).toBe(200);
      });
    });

    describe('404 card_not_found: unknown, foreign and malformed ids (D43)', () => {
      it('answers all three alike; unknown and foreign both ask the connector, a malformed id does not', async () => {
        const f = await open();
        const life = await f.token('life');
        const foreign = await f.create(await f.token('life-uk'), validCardBody({ currency: 'GBP' }));
        for (const cardId of ['card_unknown', foreign, 'not a card id!', 'x'.repeat(129), 'y'.repeat(5000)]) {
          expectContractError(await f.get(life, cardId), 404, 'card_not_found', 'Card not found');
          expectContractError(await f.patch(life, cardId, { status: 'inactive' }), 404, 'card_not_found', 'Card not found');
        }
        expect(f.connector.calls.get.map((call) => call.cardId)).toEqual(['card_unknown', foreign]);
        expect(f.connector.calls.status.map((call) => call.cardId)).toEqual(['card_unknown', foreign]);
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'read', outcome: 'card_not_found' })).toBe(5);
      });

      it('a record the connector answers for another account is not found, logged as an error and counted, without card data', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const record = await f.connector.getCard('acct-eu', cardId, { correlationId: 'x' });
        f.connector.misroute = 'acct-uk';
        expectContractError(await f.get(life, cardId), 404, 'card_not_found', 'Card not found');
        expect((await f.list(life)).json<{ data: unknown[] }>().data).toEqual([]);
        expect(await metricValue(f.gw, 'gateway_connector_foreign_records_total', { operation: 'get' })).toBe(1);
        expect(await metricValue(f.gw, 'gateway_connector_foreign_records_total', { operation: 'list' })).toBe(1);
        const lines = f.gw.logs.lines.filter((line) => line.includes('another issuing account'));
        expect(lines).toHaveLength(2);
        expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'error', cardId, expectedAccount: 'acct-eu', namedAccount: 'acct-uk' });
        expect(f.gw.logs.text()).not.toContain(record!.pan);
        expect(f.gw.audit.lines.join('\n')).not.toContain(record!.pan);
      });
    });

    describe('listing (D44)', () => {
      it('lists the account only, newest first, masked, 20 by default; limit 1 and 100 are accepted', async () => {
        const f = await open();
        const life = await f.token('life');
        for (let i = 0; i < 22; i += 1) {
          f.connector.add('acct-eu');
          f.clock.advance(1000);
        }
        f.connector.add('acct-uk');
        const page = (await f.list(life)).json<{ data: { cardId: string; createdAt: string; pan: string; cvc: string }[]; nextCursor: string | null }>();
        expect(page.data).toHaveLength(20);
        expect(page.nextCursor).toMatch(/^c1\.card-1\./);
        expect(page.data.map((card) => card.createdAt)).toEqual([...page.data.map((card) => card.createdAt)].sort().reverse());
        for (const card of page.data) expect([card.pan, card.cvc]).toEqual([expect.stringMatching(MASKED_PAN), '***']);
        expect((await f.list(life, 'limit=1')).json<{ data: unknown[] }>().data).toHaveLength(1);
        expect((await f.list(life, 'limit=100')).json<{ data: unknown[] }>().data).toHaveLength(22);
        expect(f.connector.calls.list.map((query) => query.limit)).toEqual([20, 1, 100]);
      });

      it('pages with the sealed cursor to the end, each card once', async () => {
        const f = await open();
        const life = await f.token('life');
        for (let i = 0; i < 7; i += 1) f.connector.add('acct-eu', { status: i % 2 === 0 ? 'active' : 'inactive' });
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const response = await f.list(life, `limit=3&status=active${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          expect(response.statusCode, response.body).toBe(200);
          const page = response.json<{ data: { cardId: string; status: string }[]; nextCursor: string | null }>();
          for (const card of page.data) expect(card.status).toBe('active');
          seen.push(...page.data.map((card) => card.cardId));
          cursor = page.nextCursor;
        } while (cursor !== null);
        expect(seen).toHaveLength(4);
        expect(new Set(seen).size).toBe(4);
        // The client never sees the connector's cursor, nor the connector the client's.
        expect(f.connector.calls.list.slice(1).every((query) => /^\d+$/.test(query.cursor ?? ''))).toBe(true);
      });

      it.each([
        ['limit=0', 'query.limit', 'must be >= 1'],
        ['limit=101', 'query.limit', 'must be <= 100'],
        ['limit=1.5', 'query.limit', 'must be integer'],
        ['limit=1e2', 'query.limit', 'must be integer'],
        ['limit=', 'query.limit', 'must be integer'],
        ['status=frozen', 'query.status', 'must be one of ["active","canceled","inactive"]'],
        ['createdAfter=yesterday', 'query.createdAfter', expect.stringContaining('must match pattern') as unknown as string],
        ['createdAfter=2026-02-30T00:00:00Z', 'query.createdAfter', 'is not a valid date and time'],
        ['createdAfter=2026-11-22T12:00:00.001Z&createdBefore=2026-11-22T12:00:00Z', 'query.createdAfter', 'must not be later than createdBefore'],
        ['revealDetails=true', 'query.revealDetails', 'is not a known parameter'],
        ['sort=asc', 'query.sort', 'is not a known parameter'],
      ])('%s is 400 naming %s, and nothing reaches the connector', async (query, path, message) => {
        const f = await open();
        const response = await f.list(await f.token('reader'), query);
        const body = expectContractError(response, 400, 'validation_failed', 'Request validation failed');
        expect(body.details.fields).toContainEqual({ path, message });
        expect(f.connector.calls.list).toEqual([]);
      });

      it('an altered, forged, foreign or other-filters cursor is 400 invalid_cursor, and the connector is not asked', async () => {
        const f = await open();
        const life = await f.token('life');
        for (let i = 0; i < 3; i += 1) f.connector.add('acct-eu');
        for (let i = 0; i < 3; i += 1) f.connector.add('acct-uk');
        const cursor = (await f.list(life, 'limit=1&status=active')).json<{ nextCursor: string }>().nextCursor;
        const foreign = (await f.list(await f.token('life-uk'), 'limit=1&status=active')).json<{ nextCursor: string }>().nextCursor;
        const flipped = `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`;
        const asked = f.connector.calls.list.length;
        for (const query of [
          `limit=1&status=active&cursor=${encodeURIComponent(flipped)}`,
          `limit=1&status=active&cursor=${encodeURIComponent(foreign)}`,
          `limit=1&cursor=${encodeURIComponent(cursor)}`,
          `limit=1&status=inactive&cursor=${encodeURIComponent(cursor)}`,
          `limit=1&status=active&createdBefore=2030-01-01T00:00:00Z&cursor=${encodeURIComponent(cursor)}`,
          'limit=1&status=active&cursor=2',
          `limit=1&status=active&cursor=c1.card-1.${'A'.repeat(16)}.${'A'.repeat(40)}`,
        ]) {
          expectContractError(await f.list(life, query), 400, 'invalid_cursor', 'The cursor is not valid for this listing');
        }
        expect(f.connector.calls.list).toHaveLength(asked);
        // The unchanged cursor with the same filters still works, with another page size too.
        expect((await f.list(life, `limit=2&status=active&cursor=${encodeURIComponent(cursor)}`)).statusCode).toBe(200);
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'list', outcome: 'invalid_cursor' })).toBe(7);
      });

      it('accepts createdAfter equal to createdBefore, and filters on them inclusively', async () => {
        const f = await open();
        const at = new Date(f.clock.now()).toISOString();
        f.connector.add('acct-eu');
        const response = await f.list(await f.token('reader'), `createdAfter=${at}&createdBefore=${at}`);
        expect(response.statusCode, response.body).toBe(200);
        expect(response.json<{ data: unknown[] }>().data).toHaveLength(1);
      });
    });

    describe('status changes (D45)', () => {
      it('freezes, unfreezes and cancels, each audited with from, to, reason, credential and correlation id', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const steps: [string, string][] = [
          ['active', 'inactive'],
          ['inactive', 'active'],
          ['active', 'canceled'],
        ];
        for (const [from, to] of steps) {
          const response = await f.patch(life, cardId, { status: to, reason: `trip 4711 over, ${to}` });
          expect(response.statusCode, response.body).toBe(200);
          expect(response.json<{ status: string; pan: string }>()).toMatchObject({ status: to, pan: expect.stringMatching(MASKED_PAN) });
          const events = auditEvents(f).filter((event) => event['correlationId'] === response.headers['x-correlation-id']);
          expect(events).toEqual([
            expect.objectContaining({ event: 'card.status_changed', credential: 'cred-life', cardId, from, to, reason: `trip 4711 over, ${to}` }),
          ]);
        }
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'status_change', outcome: 'changed' })).toBe(3);
      });

      it('the same status is 200 with nothing changed, audited as card.status_change_requested (a canceled card included); any change of a canceled card is 409', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const same = await f.patch(life, cardId, { status: 'active', reason: 'just checking' });
        expect(same.statusCode).toBe(200);
        expect(same.json()).toMatchObject({ cardId, status: 'active', previousStatus: 'active' });
        expect(auditEvents(f).filter((event) => event['correlationId'] === same.headers['x-correlation-id'])).toEqual([
          expect.objectContaining({
            event: 'card.status_change_requested',
            credential: 'cred-life',
            cardId,
            from: 'active',
            to: 'active',
            changed: false,
            reason: 'just checking',
          }),
        ]);
        expect((await f.patch(life, cardId, { status: 'canceled' })).json()).toMatchObject({ status: 'canceled', previousStatus: 'active' });
        const again = await f.patch(life, cardId, { status: 'canceled' });
        expect(again.json()).toMatchObject({ status: 'canceled', previousStatus: 'canceled' });
        expect(auditEvents(f).filter((event) => event['correlationId'] === again.headers['x-correlation-id'])).toEqual([
          expect.objectContaining({ event: 'card.status_change_requested', from: 'canceled', to: 'canceled', changed: false }),
        ]);
        for (const status of ['active', 'inactive']) {
          const refused = expectContractError(await f.patch(life, cardId, { status }), 409, 'card_canceled', 'The card is canceled; its status cannot change');
          expect(refused.retryAfter).toBeUndefined();
        }
        // One connector call per request, nothing read before it (D57).
        expect(f.connector.calls.status).toHaveLength(5);
        expect(f.connector.calls.get).toEqual([]);
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'status_change', outcome: 'unchanged' })).toBe(2);
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'status_change', outcome: 'changed' })).toBe(1);
      });

      it('answers the whole masked card only to a credential that also holds cards:read; to cards:update alone the id and the statuses (D56)', async () => {
        const f = await open();
        const cardId = await f.create(await f.token('life'), validCardBody({ metadata: { card_name: 'Secret trip' } }));
        const updater = await f.token('updater');
        for (const [status, previousStatus] of [
          ['active', 'active'],
          ['inactive', 'active'],
          ['inactive', 'inactive'],
        ] as const) {
          const brief = await f.patch(updater, cardId, { status });
          expect(brief.statusCode, brief.body).toBe(200);
          // Exactly these members: no PAN, no metadata, no limits of a card it may not read.
          expect(brief.json()).toEqual({ cardId, status, previousStatus });
        }
        const whole = await f.patch(await f.token('life'), cardId, { status: 'active' });
        expect(whole.json<Record<string, unknown>>()).toMatchObject({
          cardId,
          status: 'active',
          previousStatus: 'inactive',
          metadata: { card_name: 'Secret trip' },
          pan: expect.stringMatching(MASKED_PAN) as unknown as string,
          cvc: '***',
        });
        // Every request of the updater was audited, the one that changed nothing too.
        const events = auditEvents(f)
          .filter((event) => event['credential'] === 'cred-updater')
          .map((event) => [event['event'], event['changed']]);
        expect(events).toEqual([
          ['card.status_change_requested', false],
          ['card.status_changed', true],
          ['card.status_change_requested', false],
        ]);
        expect(f.connector.calls.get).toEqual([]);
      });

      it('two concurrent cancels are audited as they happened: one changed, one not (D57)', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const answers = await Promise.all([f.patch(life, cardId, { status: 'canceled' }), f.patch(await f.token('peer'), cardId, { status: 'canceled' })]);
        expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200]);
        expect(answers.map((answer) => answer.json<{ previousStatus: string }>().previousStatus).sort()).toEqual(['active', 'canceled']);
        const audited = auditEvents(f).filter((event) => String(event['event']).startsWith('card.status_change'));
        expect(audited.map((event) => [event['from'], event['to'], event['changed']]).sort()).toEqual([
          ['active', 'canceled', true],
          ['canceled', 'canceled', false],
        ]);
      });

      it.each([
        [{ status: 'inactive', note: 'x' }, 'note', 'is not a known field'],
        [{ status: 'inactive', reason: 'r'.repeat(201) }, 'reason', 'must NOT have more than 200 characters'],
        [{ status: 'inactive', reason: '' }, 'reason', 'must NOT have fewer than 1 characters'],
        [{ status: 'frozen' }, 'status', 'must be one of ["active","canceled","inactive"]'],
        [{ reason: 'no status' }, 'status', 'is required'],
      ])('%j is 400 naming its member', async (body, path, message) => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        expectContractFieldError(await f.patch(life, cardId, body), path, message);
        expect(f.connector.calls.get).toEqual([]);
      });

      it.each([
        ['spaces', 'card 4111 1111 1111 1111 shared'],
        ['dots', 'card 4111.1111.1111.1111'],
        ['no-break spaces', 'card 4111\u00a01111\u00a01111\u00a01111'],
        ['thin spaces', 'card 4111\u20091111\u20091111\u20091111'],
        ['tabs', 'card 4111\t1111\t1111\t1111'],
        ['slashes', 'card 4111/1111/1111/1111'],
        ['double spaces', 'card 4111  1111  1111  1111'],
        ['underscores', 'card 4111_1111_1111_1111'],
        ['full-width digits', 'card \uff14\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11'],
        ['Arabic-Indic digits', 'card \u0664\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661'],
        ['zero-width spaces', 'card 4111\u200b1111\u200b1111\u200b1111'],
        ['12 digits', 'card 123456789015'],
      ])('a reason holding a card number written with %s is 400 naming reason (D58), before the connector is asked', async (_name, reason) => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        const refused = expectContractFieldError(await f.patch(life, cardId, { status: 'inactive', reason }), 'reason', 'looks like a card number');
        expect(JSON.stringify(refused)).not.toContain('1111');
        expect(f.connector.calls.status).toEqual([]);
        expect(f.connector.calls.get).toEqual([]);
        expect(auditEvents(f).filter((event) => String(event['event']).startsWith('card.status'))).toEqual([]);
        // A reason with digits that are not a card number is taken.
        expect((await f.patch(life, cardId, { status: 'inactive', reason: 'booking BK-20261122 room 4111' })).statusCode).toBe(200);
      });

      it('accepts a reason of exactly 200 characters', async () => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        expect((await f.patch(life, cardId, { status: 'inactive', reason: 'r'.repeat(200) })).statusCode).toBe(200);
      });
    });

    describe('limits (D48), per credential, shared by the operations they count', () => {
      it('reads (get and list together) and status changes have their own windows, with the RateLimit headers', async () => {
        const f = await open({ rateLimits: { cardReads: { points: 3, windowSeconds: 60 }, cardStatusChanges: { points: 2, windowSeconds: 60 } } });
        const life = await f.token('life');
        const cardId = await f.create(life);
        const first = await f.get(life, cardId);
        expect(first.headers['ratelimit-policy']).toBe('"card_read";q=3;w=60');
        expect(first.headers['ratelimit']).toMatch(/^"card_read";r=2;t=\d+$/);
        expect((await f.list(life)).statusCode).toBe(200);
        expect((await f.get(life, cardId)).headers['ratelimit-remaining']).toBe('0');
        const refused = expectContractError(await f.list(life), 429, 'rate_limited', 'Rate limit exceeded, retry later');
        expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
        expect(f.connector.calls.list).toHaveLength(1);
        // Another credential, and the other limit, are untouched.
        expect((await f.get(await f.token('peer'), cardId)).statusCode).toBe(200);
        expect((await f.patch(life, cardId, { status: 'inactive' })).headers['ratelimit-policy']).toBe('"card_status";q=2;w=60');
        expect((await f.patch(life, cardId, { status: 'active' })).statusCode).toBe(200);
        expectContractError(await f.patch(life, cardId, { status: 'inactive' }), 429, 'rate_limited', 'Rate limit exceeded, retry later');
        expect(await metricValue(f.gw, 'gateway_rate_limited_total', { limiter: 'card_status' })).toBe(1);
        f.clock.advance(MINUTE);
        expect((await f.get(life, cardId)).statusCode).toBe(200);
      });
    });

    describe('connector failures: the 502/504 of creation, never a partial list', () => {
      it.each([
        ['refused', 502, 'connector_unavailable'],
        ['invalid_answer', 502, 'connector_invalid_answer'],
        ['timeout', 504, 'connector_timeout'],
      ] as const)('%s', async (kind, status, code) => {
        const f = await open();
        const life = await f.token('life');
        const cardId = await f.create(life);
        f.connector.failNext(kind, 3);
        expect((await f.get(life, cardId)).json<{ code: string; status: number }>()).toMatchObject({ status, code });
        expect((await f.list(life)).json<{ code: string; status: number }>()).toMatchObject({ status, code });
        expect((await f.patch(life, cardId, { status: 'inactive' })).json<{ code: string; status: number }>()).toMatchObject({ status, code });
        expect(await metricValue(f.gw, 'gateway_card_operations_total', { operation: 'list', outcome: code })).toBe(1);
        expect(await metricValue(f.gw, 'gateway_connector_call_duration_seconds_count', { operation: 'list' })).toBe(1);
      });
    });

    it('a creation replay stays the card as created (D46); GET shows it now', async () => {
      const f = await open();
      const life = await f.token('life');
      const body = validCardBody();
      const cardId = await f.create(life, body);
      expect((await f.patch(life, cardId, { status: 'inactive' })).statusCode).toBe(200);
      const replay = await createCard(f.gw, life, body);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json<{ status: string }>().status).toBe('active');
      expect((await f.get(life, cardId)).json<{ status: string }>().status).toBe('inactive');
    });
  });
}
