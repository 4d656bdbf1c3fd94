import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConnectorCardPage, ConnectorCardRecord } from '../../src/connector/connector-contract.js';
import { buildSandboxConnector, FOREIGN_ACCOUNT, type SandboxConnectorOptions } from '../../src/connector/sandbox/sandbox-connector.js';

/**
 * The sandbox connector's lifecycle rules (connector contract, "Card lifecycle calls"), each at
 * its boundary, over inject. The client's side of the same calls, over real sockets, is in
 * connector-client-lifecycle.test.ts.
 */

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

/** A sandbox whose clock the test sets: `clock.ms` is the next card's creation instant. */
function sandbox(opts: SandboxConnectorOptions = {}) {
  const clock = { ms: Date.UTC(2026, 0, 1) };
  const app = buildSandboxConnector({ controls: true, now: () => clock.ms, ...opts });
  apps.push(app);
  const create = async (issuingAccount: string, metadata?: Record<string, string>): Promise<ConnectorCardRecord> => {
    const requestId = randomUUID();
    const res = await app.inject({
      method: 'POST',
      url: '/v1/cards',
      headers: { 'idempotency-key': `${issuingAccount}:${requestId}` },
      payload: { requestId, issuingAccount, requestedCardLimit: 500, cardLimit: 525, currency: 'EUR', ...(metadata && { metadata }) },
    });
    expect(res.statusCode, res.body).toBe(201);
    return { ...res.json<ConnectorCardRecord>(), issuingAccount, requestId, requestedCardLimit: 500, metadata: metadata ?? {} };
  };
  const get = (cardId: string, query: string) => app.inject({ method: 'GET', url: `/v1/cards/${encodeURIComponent(cardId)}?${query}` });
  const list = (query: string) => app.inject({ method: 'GET', url: `/v1/cards?${query}` });
  const setStatus = (cardId: string, payload: Record<string, unknown>) => app.inject({ method: 'POST', url: `/v1/cards/${cardId}/status`, payload });
  const mode = async (payload: Record<string, unknown>) => expect((await app.inject({ method: 'POST', url: '/__control/mode', payload })).statusCode).toBe(200);
  return { app, clock, create, get, list, setStatus, mode };
}

const ids = (res: LightMyRequestResponse): string[] => res.json<ConnectorCardPage>().data.map((card) => card.cardId);

function expect400(res: LightMyRequestResponse, message: RegExp): void {
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json<{ message: string }>().message).toMatch(message);
}

describe('sandbox: reading one card', () => {
  it('answers the record (creation answer + issuingAccount, requestId, requestedCardLimit, metadata) to its own account only', async () => {
    const s = sandbox();
    const card = await s.create('acct-a', { trip: 'Lisbon' });
    const own = await s.get(card.cardId, 'issuingAccount=acct-a');
    expect(own.statusCode).toBe(200);
    expect(own.json()).toEqual(card);
    const other = await s.get(card.cardId, 'issuingAccount=acct-b');
    const unknown = await s.get('card_000000000000000000000000', 'issuingAccount=acct-a');
    for (const res of [other, unknown]) expect([res.statusCode, res.json()]).toEqual([404, { message: 'card not found' }]);
    // The creation answer stays the nine members of the contract, nothing of the record's extra.
    const created = await s.app.inject({
      method: 'POST',
      url: '/v1/cards',
      headers: { 'idempotency-key': `acct-a:${card.requestId}` },
      payload: { requestId: card.requestId, issuingAccount: 'acct-a', requestedCardLimit: 500, cardLimit: 525, currency: 'EUR' },
    });
    expect(Object.keys(created.json<object>())).toHaveLength(9);
  });

  it('refuses a missing, duplicated or extra query parameter with 400', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    expect400(await s.get(card.cardId, ''), /issuingAccount is required/);
    expect400(await s.get(card.cardId, 'issuingAccount='), /issuingAccount is required/);
    expect400(await s.get(card.cardId, `issuingAccount=${'a'.repeat(129)}`), /issuingAccount/);
    expect((await s.get(card.cardId, `issuingAccount=acct-a`)).statusCode).toBe(200);
    expect400(await s.get(card.cardId, 'issuingAccount=acct-a&issuingAccount=acct-b'), /issuingAccount must be given once/);
    expect400(await s.get(card.cardId, 'issuingAccount=acct-a&revealDetails=true'), /unknown query parameter revealDetails/);
  });
});

describe('sandbox: listing cards', () => {
  it('lists the account’s cards newest first, ties broken by creation order, other accounts never', async () => {
    const s = sandbox();
    const a1 = await s.create('acct-a');
    s.clock.ms += 1;
    const a2 = await s.create('acct-a');
    const a3 = await s.create('acct-a'); // same millisecond as a2: created later, listed first
    await s.create('acct-b');
    s.clock.ms -= 10; // a clock that went back: the card is older than all others
    const a0 = await s.create('acct-a');
    const res = await s.list('issuingAccount=acct-a&limit=100');
    expect(res.statusCode).toBe(200);
    expect(ids(res)).toEqual([a3.cardId, a2.cardId, a1.cardId, a0.cardId]);
    expect(res.json<ConnectorCardPage>().nextCursor).toBeNull();
    expect(res.json<ConnectorCardPage>().data[0]).toEqual(a3);
    expect(ids(await s.list('issuingAccount=acct-none'))).toEqual([]);
  });

  it('pages with the cursor: limit 1 walks every card once, the last page has no cursor', async () => {
    const s = sandbox();
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1) made.unshift((await s.create('acct-a')).cardId);
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages += 1) {
      const res = await s.list(`issuingAccount=acct-a&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      const page = res.json<ConnectorCardPage>();
      expect(page.data).toHaveLength(1);
      seen.push(page.data[0]!.cardId);
      cursor = page.nextCursor;
      if (cursor === null) break;
    }
    expect(seen).toEqual(made);
    // Exactly as many as the limit left: no cursor to an empty page.
    expect((await s.list('issuingAccount=acct-a&limit=5')).json<ConnectorCardPage>().nextCursor).toBeNull();
    expect((await s.list('issuingAccount=acct-a&limit=4')).json<ConnectorCardPage>().nextCursor).not.toBeNull();
  });

  it('takes limit 1 and 100, defaults to 20, refuses 0, 101, 1.5, 1e2, 01 and text', async () => {
    const s = sandbox();
    for (let i = 0; i < 101; i += 1) await s.create('acct-a');
    expect(ids(await s.list('issuingAccount=acct-a&limit=1'))).toHaveLength(1);
    expect(ids(await s.list('issuingAccount=acct-a&limit=100'))).toHaveLength(100);
    expect(ids(await s.list('issuingAccount=acct-a'))).toHaveLength(20);
    for (const limit of ['0', '101', '1.5', '1e2', '01', 'ten', '', '-1']) {
      expect400(await s.list(`issuingAccount=acct-a&limit=${limit}`), /limit must be an integer from 1 to 100/);
    }
  });

  it('filters by status and by creation instant, both bounds inclusive (D61), to the millisecond', async () => {
    const s = sandbox();
    s.clock.ms = Date.parse('2026-03-01T10:00:00.000Z');
    const early = await s.create('acct-a');
    s.clock.ms = Date.parse('2026-03-01T10:00:00.001Z');
    const middle = await s.create('acct-a');
    s.clock.ms = Date.parse('2026-03-01T10:00:00.002Z');
    const late = await s.create('acct-a');
    expect((await s.setStatus(middle.cardId, { issuingAccount: 'acct-a', status: 'inactive' })).statusCode).toBe(200);

    const listed = async (query: string) => ids(await s.list(`issuingAccount=acct-a&${query}`));
    expect(await listed('status=inactive')).toEqual([middle.cardId]);
    expect(await listed('status=active')).toEqual([late.cardId, early.cardId]);
    expect(await listed('status=canceled')).toEqual([]);
    // A card created at the bound itself is listed; one a millisecond outside is not.
    expect(await listed('createdAfter=2026-03-01T10:00:00.001Z')).toEqual([late.cardId, middle.cardId]);
    expect(await listed('createdAfter=2026-03-01T10:00:00.000Z')).toEqual([late.cardId, middle.cardId, early.cardId]);
    expect(await listed('createdAfter=2026-03-01T10:00:00.0010001Z')).toEqual([late.cardId]);
    expect(await listed('createdBefore=2026-03-01T10:00:00.001Z')).toEqual([middle.cardId, early.cardId]);
    expect(await listed('createdBefore=2026-03-01T10:00:00.0019999Z')).toEqual([middle.cardId, early.cardId]);
    expect(await listed('createdBefore=2026-03-01T10:00:00.002Z')).toEqual([late.cardId, middle.cardId, early.cardId]);
    expect(await listed('createdAfter=2026-03-01T10:00:00.001Z&createdBefore=2026-03-01T10:00:00.001Z')).toEqual([middle.cardId]);
    expect(await listed('createdAfter=2026-03-01T10:00:00.000Z&createdBefore=2026-03-01T10:00:00.002Z')).toEqual([late.cardId, middle.cardId, early.cardId]);
    expect(await listed('createdAfter=2026-03-01T10:00:00Z&status=active')).toEqual([late.cardId, early.cardId]);
  });

  it('refuses a bad status, a bad instant, reversed bounds, a foreign cursor and unknown parameters with 400', async () => {
    const s = sandbox();
    await s.create('acct-a');
    expect400(await s.list('issuingAccount=acct-a&status=frozen'), /status must be one of/);
    for (const instant of ['2026-02-30T00:00:00Z', '2026-03-01T10:00:00+01:00', '2026-03-01', '2026-03-01T24:00:00Z', 'yesterday']) {
      expect400(await s.list(`issuingAccount=acct-a&createdAfter=${encodeURIComponent(instant)}`), /createdAfter must be an ISO 8601 UTC instant/);
    }
    expect400(await s.list('issuingAccount=acct-a&createdBefore=2026-13-01T00:00:00Z'), /createdBefore must be/);
    expect400(
      await s.list('issuingAccount=acct-a&createdAfter=2026-03-01T10:00:00.0000001Z&createdBefore=2026-03-01T10:00:00Z'),
      /createdAfter must not be later than createdBefore/,
    );
    for (const cursor of ['x', 'MTc2NzIyNTYwMDAwMDox=', Buffer.from('1:0').toString('base64url'), Buffer.from('01:1').toString('base64url')]) {
      expect400(await s.list(`issuingAccount=acct-a&cursor=${cursor}`), /cursor is not a cursor of this connector/);
    }
    expect(ids(await s.list(`issuingAccount=acct-a&cursor=${Buffer.from('1:1').toString('base64url')}`))).toEqual([]);
    expect400(await s.list('issuingAccount=acct-a&offset=20'), /unknown query parameter offset/);
    expect400(await s.list('limit=5'), /issuingAccount is required/);
  });
});

describe('sandbox: changing a card’s status', () => {
  it('freezes, unfreezes, answers the same status unchanged, and keeps canceled final', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    const change = async (status: string) => s.setStatus(card.cardId, { issuingAccount: 'acct-a', status, reason: 'test' });
    const frozen = await change('inactive');
    expect([frozen.statusCode, frozen.json()]).toEqual([200, { ...card, status: 'inactive', previousStatus: 'active', changed: true }]);
    // D57: each answer says what the card was before this call and whether the call changed it.
    const answered = async (status: string) => {
      const { previousStatus, changed, status: now } = (await change(status)).json<ConnectorCardRecord & { previousStatus: string; changed: boolean }>();
      return [previousStatus, now, changed];
    };
    expect(await answered('inactive')).toEqual(['inactive', 'inactive', false]);
    expect(await answered('active')).toEqual(['inactive', 'active', true]);
    expect(await answered('canceled')).toEqual(['active', 'canceled', true]);
    // A repeated cancel is a safe retry; any other change of a canceled card is refused.
    expect((await change('canceled')).statusCode).toBe(200);
    expect(await answered('canceled')).toEqual(['canceled', 'canceled', false]);
    for (const status of ['active', 'inactive']) {
      const refused = await change(status);
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toEqual({ message: expect.any(String) as string, code: 'card_canceled' });
    }
    expect((await s.get(card.cardId, 'issuingAccount=acct-a')).json<ConnectorCardRecord>().status).toBe('canceled');
  });

  it('cancels an inactive card', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    await s.setStatus(card.cardId, { issuingAccount: 'acct-a', status: 'inactive' });
    expect((await s.setStatus(card.cardId, { issuingAccount: 'acct-a', status: 'canceled' })).json<ConnectorCardRecord>().status).toBe('canceled');
  });

  it('of two concurrent changes to one status, exactly one answers changed: true (D57)', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    const answers = await Promise.all(Array.from({ length: 4 }, () => s.setStatus(card.cardId, { issuingAccount: 'acct-a', status: 'canceled' })));
    const results = answers.map((res) => res.json<{ previousStatus: string; changed: boolean }>());
    expect(results.filter((result) => result.changed)).toEqual([expect.objectContaining({ previousStatus: 'active', changed: true })]);
    expect(results.filter((result) => !result.changed)).toHaveLength(3);
  });

  it('routes card ids up to the contract’s 128 characters (the router’s default stopped at 100)', async () => {
    const s = sandbox();
    for (const length of [100, 101, 128]) {
      const cardId = 'c'.repeat(length);
      expect([(await s.get(cardId, 'issuingAccount=acct-a')).statusCode, (await s.get(cardId, 'issuingAccount=acct-a')).json()]).toEqual([
        404,
        { message: 'card not found' },
      ]);
      const res = await s.setStatus(cardId, { issuingAccount: 'acct-a', status: 'canceled' });
      expect([res.statusCode, res.json()]).toEqual([404, { message: 'card not found' }]);
    }
  });

  it('answers 404 for another account’s card and changes nothing', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    const res = await s.setStatus(card.cardId, { issuingAccount: 'acct-b', status: 'canceled' });
    expect([res.statusCode, res.json()]).toEqual([404, { message: 'card not found' }]);
    expect((await s.setStatus('card_unknown', { issuingAccount: 'acct-a', status: 'canceled' })).statusCode).toBe(404);
    expect((await s.get(card.cardId, 'issuingAccount=acct-a')).json<ConnectorCardRecord>().status).toBe('active');
  });

  it('takes a reason of 1 to 200 characters and refuses any other body with 400', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    const ok = { issuingAccount: 'acct-a', status: 'inactive' };
    expect((await s.setStatus(card.cardId, { ...ok, reason: 'r'.repeat(200) })).statusCode).toBe(200);
    expect((await s.setStatus(card.cardId, { ...ok, reason: 'r' })).statusCode).toBe(200);
    expect400(await s.setStatus(card.cardId, { ...ok, reason: 'r'.repeat(201) }), /reason/);
    expect400(await s.setStatus(card.cardId, { ...ok, reason: '' }), /reason/);
    expect400(await s.setStatus(card.cardId, { ...ok, status: 'frozen' }), /status/);
    expect400(await s.setStatus(card.cardId, { status: 'inactive' }), /issuingAccount/);
    expect400(await s.setStatus(card.cardId, { ...ok, cardLimit: 1 }), /must not have the member cardLimit/);
    const plain = await s.app.inject({ method: 'POST', url: `/v1/cards/${card.cardId}/status`, headers: { 'content-type': 'text/plain' }, payload: 'x' });
    expect(plain.statusCode).toBe(415);
  });
});

describe('sandbox: lifecycle routes under the gateway secret and the fault modes', () => {
  it('answers 401 on every lifecycle route without the secret', async () => {
    const s = sandbox({ sharedSecret: 'topsecret' });
    const inject = (method: 'GET' | 'POST', url: string, secret?: string) =>
      s.app.inject({
        method,
        url,
        headers: secret ? { 'x-gateway-secret': secret } : {},
        ...(method === 'POST' && { payload: { issuingAccount: 'a', status: 'active' } }),
      });
    for (const [method, url] of [
      ['GET', '/v1/cards/card_x?issuingAccount=a'],
      ['GET', '/v1/cards?issuingAccount=a'],
      ['POST', '/v1/cards/card_x/status'],
    ] as const) {
      expect((await inject(method, url)).statusCode).toBe(401);
      expect((await inject(method, url, 'topsecreT')).statusCode).toBe(401);
      expect((await inject(method, url, 'topsecret')).statusCode).not.toBe(401);
    }
  });

  it('fail, garbage and count apply to lifecycle calls; a failed status change changes nothing', async () => {
    const s = sandbox();
    const card = await s.create('acct-a');
    await s.mode({ mode: 'fail', status: 503, count: 2 });
    expect((await s.get(card.cardId, 'issuingAccount=acct-a')).statusCode).toBe(503);
    expect((await s.setStatus(card.cardId, { issuingAccount: 'acct-a', status: 'canceled' })).statusCode).toBe(503);
    expect((await s.get(card.cardId, 'issuingAccount=acct-a')).json<ConnectorCardRecord>().status).toBe('active');
    await s.mode({ mode: 'garbage', count: 1 });
    const garbage = await s.list('issuingAccount=acct-a');
    expect(garbage.statusCode).toBe(200);
    expect(() => JSON.parse(garbage.body) as unknown).toThrow();
  });

  it('wrong-shape breaks one member of the answer (a page’s last record) and makes no status change', async () => {
    const s = sandbox();
    const first = await s.create('acct-a');
    const second = await s.create('acct-a');
    await s.mode({ mode: 'wrong-shape', count: 4 });
    expect((await s.get(first.cardId, 'issuingAccount=acct-a')).json<Record<string, unknown>>()['cardLimit']).toBe('525');
    const page = (await s.list('issuingAccount=acct-a')).json<{ data: Array<Record<string, unknown>> }>();
    expect(page.data.map((card) => card['cardLimit'])).toEqual([525, '525']);
    expect((await s.list('issuingAccount=acct-none')).json()).toEqual({ data: [{ cardId: 42 }], nextCursor: null });
    expect((await s.setStatus(second.cardId, { issuingAccount: 'acct-a', status: 'canceled' })).json<Record<string, unknown>>()['cardLimit']).toBe('525');
    expect((await s.get(second.cardId, 'issuingAccount=acct-a')).json<ConnectorCardRecord>().status).toBe('active');
  });

  it('foreign-account answers records naming another account, finding cards of any account', async () => {
    const s = sandbox();
    const mine = await s.create('acct-a');
    const theirs = await s.create('acct-b');
    await s.mode({ mode: 'foreign-account' });
    const own = (await s.get(mine.cardId, 'issuingAccount=acct-a')).json<ConnectorCardRecord>();
    expect({ ...own, issuingAccount: 'acct-a' }).toEqual(mine);
    expect(own.issuingAccount).toBe(FOREIGN_ACCOUNT);
    expect((await s.get(theirs.cardId, 'issuingAccount=acct-a')).json()).toEqual(theirs);
    const page = (await s.list('issuingAccount=acct-b')).json<ConnectorCardPage>();
    expect(page.data.map((card) => card.issuingAccount)).toEqual([FOREIGN_ACCOUNT]);
    const changed = await s.setStatus(theirs.cardId, { issuingAccount: 'acct-a', status: 'inactive' });
    expect(changed.json<ConnectorCardRecord>()).toEqual({ ...theirs, status: 'inactive', previousStatus: 'active', changed: true });
    await s.mode({ mode: 'normal' });
    expect((await s.get(theirs.cardId, 'issuingAccount=acct-a')).statusCode).toBe(404);
  });
});
