import { Agent, fetch as undiciFetch } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, isWholeCard, NetworkError, type CardGatewayClient, type CardRecord, type FetchLike } from '../src/index.js';
import { cardInput, PASSWORD, rejectionOf, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * Reading, listing and changing cards through the client, against a real gateway over TLS and a
 * real sandbox connector: what each method answers, the listing followed across pages, and the
 * retry rules (a read after 503 and 502, a status change after a lost answer, 404, 409 and 400
 * final).
 */

const CARD_ROUTE = '/api/v1/issuing/cards/:cardId';
const LIST_ROUTE = '/api/v1/issuing/cards';

/** The status-change requests that reached the sandbox connector. */
const statusCalls = async (g: RealGateway): Promise<number> =>
  (await g.connectorStats()).received.filter((request) => request.method === 'POST' && request.url.endsWith('/status')).length;

/** The list requests that reached the sandbox connector. */
const listCalls = async (g: RealGateway): Promise<string[]> =>
  (await g.connectorStats()).received.filter((request) => request.method === 'GET' && request.url.startsWith('/v1/cards?')).map((request) => request.url);

async function loggedIn(g: RealGateway, username = 'life', options: Parameters<RealGateway['client']>[0] = {}): Promise<CardGatewayClient> {
  const client = g.client(options);
  await client.login(username, PASSWORD);
  return client;
}

async function collect(cards: AsyncIterable<CardRecord>): Promise<CardRecord[]> {
  const all: CardRecord[] = [];
  for await (const card of cards) all.push(card);
  return all;
}

describe('the card lifecycle through the client', () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  it('getCard answers the card as it is now, masked or revealed; an unknown id and another account are the same final 404', async () => {
    g = await startRealGateway();
    const client = await loggedIn(g);
    const created = await client.createCard(cardInput());

    const read = await client.getCard(created.card.cardId);
    expect(read).toEqual({ ...created.card, requestId: created.requestId, metadata: { card_name: 'Trip' } });
    expect(read.pan).toMatch(/^\*{12}\d{4}$/);
    const revealed = await client.getCard(created.card.cardId, { revealDetails: true });
    expect(revealed.pan).toMatch(/^400000\d{10}$/);
    expect(revealed.pan.slice(-4)).toBe(read.pan.slice(-4));
    expect(revealed.cvc).toMatch(/^\d{3}$/);
    expect(g.auditEvents('card.revealed')).toHaveLength(1);

    const unknown = await rejectionOf(client.getCard('card_000000000000000000000000'));
    expect(unknown).toBeInstanceOf(ApiError);
    expect(unknown).toMatchObject({ code: 'card_not_found', status: 404, retryable: false, attempts: 1 });
    const otherAccount = await loggedIn(g, 'life-uk');
    await expect(otherAccount.getCard(created.card.cardId)).rejects.toMatchObject({ code: 'card_not_found', status: 404, retryable: false, attempts: 1 });
    // An id with characters that need escaping stays one path segment: still just not found.
    await expect(client.getCard('card_1/../../auth/login?x=1')).rejects.toMatchObject({ code: 'card_not_found', status: 404, attempts: 1 });
    // A credential without cards:read is refused, finally.
    const creator = await loggedIn(g, 'create-only');
    await expect(creator.getCard(created.card.cardId)).rejects.toMatchObject({ code: 'permission_denied', status: 403, retryable: false, attempts: 1 });
    expect(g.retries).toEqual([]);
    expect(await g.metric('gateway_http_requests_total', { method: 'GET', route: CARD_ROUTE, status_code: '404' })).toBe(3);
  });

  it('freezes, unfreezes and cancels; a repeated change answers the card unchanged; a change of a canceled card is a final 409', async () => {
    g = await startRealGateway();
    const client = await loggedIn(g);
    const { card } = await client.createCard(cardInput());

    const frozen = await client.freezeCard(card.cardId, 'Card details shared by mistake');
    expect(frozen).toMatchObject({ cardId: card.cardId, status: 'inactive', previousStatus: 'active' });
    // `life` holds cards:read: the whole card, masked.
    expect(isWholeCard(frozen) && frozen.pan).toMatch(/^\*{12}\d{4}$/);
    expect((await client.getCard(card.cardId)).status).toBe('inactive');
    expect(await client.freezeCard(card.cardId)).toMatchObject({ status: 'inactive', previousStatus: 'inactive' });
    expect((await client.unfreezeCard(card.cardId)).status).toBe('active');
    expect((await client.cancelCard(card.cardId, 'Trip over')).status).toBe('canceled');
    // Canceling again is asking for the status it has: 200, nothing changed.
    expect(await client.cancelCard(card.cardId)).toMatchObject({ status: 'canceled', previousStatus: 'canceled' });
    // One connector call per change, none to read first (D57).
    expect(await statusCalls(g)).toBe(5);
    const changes = g.auditEvents('card.status_changed');
    expect(changes.map((event) => [event.from, event.to, event.reason])).toEqual([
      ['active', 'inactive', 'Card details shared by mistake'],
      ['inactive', 'active', undefined],
      ['active', 'canceled', 'Trip over'],
    ]);
    expect(g.auditEvents('card.status_change_requested').map((event) => [event.from, event.to])).toEqual([
      ['inactive', 'inactive'],
      ['canceled', 'canceled'],
    ]);

    for (const change of [client.unfreezeCard(card.cardId), client.freezeCard(card.cardId, 'again')]) {
      const refused = await rejectionOf(change);
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ code: 'card_canceled', status: 409, retryable: false, attempts: 1 });
    }
    await expect(client.freezeCard('card_000000000000000000000000')).rejects.toMatchObject({ code: 'card_not_found', status: 404, attempts: 1 });
    // A reason over 200 characters, or holding a card number, is the gateway's 400, final.
    await expect(client.cancelCard(card.cardId, 'x'.repeat(201))).rejects.toMatchObject({ code: 'validation_failed', status: 400, attempts: 1 });
    await expect(client.cancelCard(card.cardId, 'card 4111 1111 1111 1111')).rejects.toMatchObject({ code: 'validation_failed', status: 400, attempts: 1 });
    expect(g.retries).toEqual([]);
    expect(g.sleeps).toEqual([]);
    // The two refused changes of the canceled card and the unknown id asked the connector once each.
    expect(await statusCalls(g)).toBe(8);
  });

  it('answers a credential with cards:update alone the id and the statuses, nothing it may not read (D56)', async () => {
    g = await startRealGateway();
    const { card } = await (await loggedIn(g)).createCard(cardInput());
    const updater = await loggedIn(g, 'updater');
    const frozen = await updater.freezeCard(card.cardId, 'lost in transit');
    expect(frozen).toEqual({ cardId: card.cardId, status: 'inactive', previousStatus: 'active' });
    expect(isWholeCard(frozen)).toBe(false);
    expect(await updater.freezeCard(card.cardId)).toEqual({ cardId: card.cardId, status: 'inactive', previousStatus: 'inactive' });
  });

  it('listCards follows nextCursor across pages: every card once, newest first, with the filters on every page', async () => {
    g = await startRealGateway();
    const client = await loggedIn(g);
    const created: string[] = [];
    for (let i = 0; i < 7; i += 1) created.push((await client.createCard(cardInput())).card.cardId);
    // Another account's card is never listed.
    await (await loggedIn(g, 'life-uk')).createCard({ cardLimit: 500, currency: 'GBP' });

    const all = await collect(client.listCards({ limit: 3 }));
    expect(all.map((card) => card.cardId)).toEqual([...created].reverse());
    expect(all.every((card) => card.pan.startsWith('************') && card.cvc === '***')).toBe(true);
    // 3 + 3 + 1: three pages, the second and third with the previous page's cursor.
    const pages = await listCalls(g);
    expect(pages).toHaveLength(3);
    expect(pages.filter((url) => url.includes('cursor='))).toHaveLength(2);

    // One page at a time: the last page's nextCursor is null.
    const first = await client.listCardsPage({ limit: 4 });
    expect(first.data.map((card) => card.cardId)).toEqual(all.slice(0, 4).map((card) => card.cardId));
    expect(first.nextCursor).toEqual(expect.any(String));
    const last = await client.listCardsPage({ limit: 4, cursor: first.nextCursor! });
    expect(last.data.map((card) => card.cardId)).toEqual(all.slice(4).map((card) => card.cardId));
    expect(last.nextCursor).toBeNull();

    // Filters travel with every page.
    await client.freezeCard(created[1]!);
    await client.freezeCard(created[4]!);
    await client.freezeCard(created[5]!);
    const frozen = await collect(client.listCards({ status: 'inactive', limit: 2 }));
    expect(frozen.map((card) => card.cardId)).toEqual([created[5], created[4], created[1]]);
    expect(frozen.every((card) => card.status === 'inactive')).toBe(true);
    expect((await listCalls(g)).slice(-2).every((url) => url.includes('status=inactive'))).toBe(true);

    // A cursor used with other filters, or altered, is a final 400.
    const inactivePage = await client.listCardsPage({ status: 'inactive', limit: 1 });
    await expect(client.listCardsPage({ status: 'active', cursor: inactivePage.nextCursor! })).rejects.toMatchObject({
      code: 'invalid_cursor',
      status: 400,
      retryable: false,
      attempts: 1,
    });
    const altered = `${first.nextCursor!.slice(0, -2)}${first.nextCursor!.endsWith('AA') ? 'BB' : 'AA'}`;
    await expect(collect(client.listCards({ limit: 4, cursor: altered }))).rejects.toMatchObject({ code: 'invalid_cursor', status: 400, attempts: 1 });
    expect(g.retries).toEqual([]);
    expect(await g.metric('gateway_http_requests_total', { method: 'GET', route: LIST_ROUTE, status_code: '400' })).toBe(2);
  });

  it('a read refused with 503 is retried after Retry-After, and a page the connector failed (502) is retried with backoff', async () => {
    g = await startRealGateway();
    const client = await loggedIn(g);
    const { card } = await client.createCard(cardInput());
    // A reveal is audited: while the audit trail cannot be written it is 503 (retryAfter 5),
    // mended here while the client waits.
    g.gw.audit.setWritable(false);
    g.onSleep = () => g?.gw.audit.setWritable(true);

    const revealed = await client.getCard(card.cardId, { revealDetails: true });

    expect(revealed.pan).toMatch(/^400000\d{10}$/);
    expect(g.retries).toHaveLength(1);
    expect(g.retries[0]).toMatchObject({ operation: 'getCard', attempt: 1, error: { code: 'audit_unavailable', status: 503, retryAfter: 5, retryable: true } });
    expect(g.retries[0]!.delayMs).toBeGreaterThanOrEqual(5_000);
    expect(g.retries[0]!.delayMs).toBeLessThan(5_250);

    g.onSleep = undefined;
    await g.setConnectorMode({ mode: 'fail', count: 1 });
    const all = await collect(client.listCards());
    expect(all.map((listed) => listed.cardId)).toEqual([card.cardId]);
    expect(g.retries).toHaveLength(2);
    expect(g.retries[1]).toMatchObject({ operation: 'listCards', attempt: 1, error: { code: 'connector_unavailable', status: 502, retryable: true } });
    expect(await listCalls(g)).toHaveLength(2);
  });

  it('a status change whose answer was lost on the way back is retried: the card is frozen once and the client gets it', async () => {
    g = await startRealGateway();
    const session = await g.client().login('life', PASSWORD);
    const { card } = await g.client({ session }).createCard(cardInput());
    // A fetch that lets the first PATCH reach the gateway and be answered, then aborts before
    // the answer is read: the change is made, the client sees the connection go down.
    const agent = new Agent({ connect: { ca: g.ca } });
    let dropped = 0;
    const dropping: FetchLike = async (url, init) => {
      if (init.method !== 'PATCH' || dropped > 0) return undiciFetch(url, { ...init, dispatcher: agent });
      dropped += 1;
      const cut = new AbortController();
      const response = await undiciFetch(url, { ...init, signal: AbortSignal.any([init.signal, cut.signal]), dispatcher: agent });
      cut.abort(new Error('connection dropped'));
      return { status: response.status, headers: response.headers, text: () => response.text() };
    };
    try {
      const client = g.client({ session, fetch: dropping });
      const frozen = await client.freezeCard(card.cardId, 'lost answer');

      expect(frozen).toMatchObject({ cardId: card.cardId, status: 'inactive' });
      expect(dropped).toBe(1);
      expect(g.retries).toHaveLength(1);
      expect(g.retries[0]!.error).toBeInstanceOf(NetworkError);
      expect(g.retries[0]).toMatchObject({ operation: 'freezeCard', attempt: 1, error: { code: 'network_error', retryable: true } });
      // The first attempt froze the card; the retry found it frozen and changed nothing.
      expect(await statusCalls(g)).toBe(2);
      expect(g.auditEvents('card.status_changed')).toHaveLength(1);
      expect(g.auditEvents('card.status_change_requested')).toHaveLength(1);
      expect(await g.metric('gateway_http_requests_total', { method: 'PATCH', route: CARD_ROUTE, status_code: '200' })).toBe(2);
      expect((await client.getCard(card.cardId)).status).toBe('inactive');
    } finally {
      await agent.close();
    }
  });
});
