import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnectorClient } from '../../src/connector/connector-client.js';
import type { ConnectorClient } from '../../src/connector/connector-port.js';
import { FOREIGN_ACCOUNT } from '../../src/connector/sandbox/sandbox-connector.js';
import { expectConnectorFailure, SANDBOX_SECRET, startLifecycleSandbox, type LifecycleSandbox } from '../support/connector-lifecycle.js';
import { freePort } from '../support/ports.js';

/**
 * The connector client's lifecycle calls (connector contract, "Card lifecycle calls") against
 * the real sandbox connector over mutual TLS and the shared secret: what goes upstream, what
 * comes back, and every way an answer is refused. Timeouts are hang guards, never asserted.
 */

let sandbox: LifecycleSandbox;
let client: ConnectorClient;
const meta = { correlationId: 'corr-lifecycle-1' };

beforeAll(async () => {
  sandbox = await startLifecycleSandbox();
  client = await sandbox.client();
});
afterAll(async () => {
  await sandbox.close();
});

describe('connector client: what reaches the connector', () => {
  it('sends the contract’s path, query and headers only: correlation id and secret, no Idempotency-Key', async () => {
    const card = await sandbox.seed('acct-head');
    await client.getCard('acct-head', card.cardId, meta);
    await client.listCards(
      { issuingAccount: 'acct-head', limit: 5, status: 'active', createdAfter: '2020-01-01T00:00:00Z', createdBefore: '2999-01-01T00:00:00.5Z' },
      meta,
    );
    await client.setCardStatus(card.cardId, { issuingAccount: 'acct-head', status: 'inactive', reason: 'lost' }, meta);
    const [get, list, change] = (await sandbox.stats()).received.slice(-3);
    expect(get).toMatchObject({ method: 'GET', url: `/v1/cards/${card.cardId}?issuingAccount=acct-head` });
    expect(list).toMatchObject({
      method: 'GET',
      url: '/v1/cards?issuingAccount=acct-head&limit=5&status=active&createdAfter=2020-01-01T00%3A00%3A00Z&createdBefore=2999-01-01T00%3A00%3A00.5Z',
    });
    expect(change).toMatchObject({ method: 'POST', url: `/v1/cards/${card.cardId}/status` });
    expect((await sandbox.stats()).lastBody).toEqual({ issuingAccount: 'acct-head', status: 'inactive', reason: 'lost' });
    for (const request of [get!, list!, change!]) {
      expect(request.headers['x-correlation-id']).toBe('corr-lifecycle-1');
      expect(request.headers['x-gateway-secret']).toBe(SANDBOX_SECRET);
      const allowed = ['host', 'connection', 'accept', 'x-correlation-id', 'x-gateway-secret', 'content-type', 'content-length'];
      expect(Object.keys(request.headers).filter((name) => !allowed.includes(name))).toEqual([]);
    }
    expect(get!.headers['content-type']).toBeUndefined();
  });

  it('encodes every query value and the card id: an account or id cannot add parameters or leave the path', async () => {
    const account = 'acct a&limit=1?#%/é';
    const card = await sandbox.seed(account);
    expect((await client.getCard(account, card.cardId, meta))?.issuingAccount).toBe(account);
    const page = await client.listCards({ issuingAccount: account, limit: 2 }, meta);
    expect(page.data.map((record) => record.cardId)).toEqual([card.cardId]);
    const encoded = 'acct%20a%26limit%3D1%3F%23%25%2F%C3%A9';
    expect((await sandbox.stats()).received.slice(-2).map((request) => request.url)).toEqual([
      `/v1/cards/${card.cardId}?issuingAccount=${encoded}`,
      `/v1/cards?issuingAccount=${encoded}&limit=2`,
    ]);
    expect(await client.getCard('acct-head', '../../health', meta)).toBeNull();
    expect(await client.setCardStatus('x/../../cards', { issuingAccount: 'acct-head', status: 'active' }, meta)).toEqual({ outcome: 'not_found' });
    expect((await sandbox.stats()).received.slice(-2).map((request) => request.url)).toEqual([
      '/v1/cards/%2E%2E%2F%2E%2E%2Fhealth?issuingAccount=acct-head',
      '/v1/cards/x%2F%2E%2E%2F%2E%2E%2Fcards/status',
    ]);
  });

  it('sends nothing of a caller’s extra members in a status change', async () => {
    const card = await sandbox.seed('acct-extra');
    const change = { issuingAccount: 'acct-extra', status: 'inactive' as const, cardLimit: 1, authorization: 'Bearer x' };
    expect((await client.setCardStatus(card.cardId, change, meta)).outcome).toBe('updated');
    expect((await sandbox.stats()).lastBody).toEqual({ issuingAccount: 'acct-extra', status: 'inactive' });
  });
});

describe('connector client: answers', () => {
  it('reads a card as its record, and null for an unknown id or another account’s card', async () => {
    const card = await sandbox.seed('acct-read', { trip: 'Porto' });
    const record = await client.getCard('acct-read', card.cardId, meta);
    expect(record).toEqual({ ...card, issuingAccount: 'acct-read', requestedCardLimit: 1000, metadata: { trip: 'Porto' } });
    expect(await client.getCard('acct-other', card.cardId, meta)).toBeNull();
    expect(await client.getCard('acct-read', 'card_000000000000000000000000', meta)).toBeNull();
    expect(await client.getCard('acct-read', '', meta)).toBeNull();
  });

  it('lists pages of limit 1 and limit 100, newest first, following the cursor to the end', async () => {
    const made: string[] = [];
    for (let i = 0; i < 101; i += 1) made.unshift((await sandbox.seed('acct-pages')).cardId);
    const one = await client.listCards({ issuingAccount: 'acct-pages', limit: 1 }, meta);
    expect(one.data.map((record) => record.cardId)).toEqual(made.slice(0, 1));
    expect(one.nextCursor).toEqual(expect.any(String));
    const hundred = await client.listCards({ issuingAccount: 'acct-pages', limit: 100 }, meta);
    expect(hundred.data.map((record) => record.cardId)).toEqual(made.slice(0, 100));
    const rest = await client.listCards({ issuingAccount: 'acct-pages', limit: 100, cursor: hundred.nextCursor! }, meta);
    expect([rest.data.map((record) => record.cardId), rest.nextCursor]).toEqual([made.slice(100), null]);
  });

  it('changes a status: updated, the same status unchanged, canceled final, not_found for another account', async () => {
    const card = await sandbox.seed('acct-status');
    const change = (status: 'active' | 'inactive' | 'canceled', account = 'acct-status') =>
      client.setCardStatus(card.cardId, { issuingAccount: account, status }, meta);
    const frozen = await change('inactive');
    expect(frozen.outcome === 'updated' && frozen.card.status).toBe('inactive');
    expect(await change('inactive')).toMatchObject({ outcome: 'updated', card: { status: 'inactive' } });
    expect(await change('canceled', 'acct-other')).toEqual({ outcome: 'not_found' });
    expect(await change('canceled')).toMatchObject({ outcome: 'updated', card: { status: 'canceled' } });
    expect(await change('canceled')).toMatchObject({ outcome: 'updated', card: { status: 'canceled' } });
    expect(await change('active')).toEqual({ outcome: 'card_canceled' });
    expect(await change('inactive')).toEqual({ outcome: 'card_canceled' });
  });

  it('passes on a record that names another account: the account check is the use case’s', async () => {
    const card = await sandbox.seed('acct-foreign');
    await sandbox.mode({ mode: 'foreign-account', count: 3 });
    expect((await client.getCard('acct-foreign', card.cardId, meta))?.issuingAccount).toBe(FOREIGN_ACCOUNT);
    expect((await client.listCards({ issuingAccount: 'acct-foreign', limit: 10 }, meta)).data.map((record) => record.issuingAccount)).toEqual([
      FOREIGN_ACCOUNT,
    ]);
    expect(await client.setCardStatus(card.cardId, { issuingAccount: 'acct-foreign', status: 'inactive' }, meta)).toMatchObject({
      outcome: 'updated',
      card: { issuingAccount: FOREIGN_ACCOUNT, status: 'inactive' },
    });
  });
});

describe('connector client: refused answers and failures', () => {
  it('wrong-shape and garbage are invalid_answer on every call; one bad record rejects the whole page', async () => {
    const card = await sandbox.seed('acct-shape');
    await sandbox.seed('acct-shape');
    const calls = [
      () => client.getCard('acct-shape', card.cardId, meta),
      () => client.listCards({ issuingAccount: 'acct-shape', limit: 10 }, meta),
      () => client.setCardStatus(card.cardId, { issuingAccount: 'acct-shape', status: 'inactive' }, meta),
    ];
    for (const mode of ['wrong-shape', 'garbage'] as const) {
      for (const call of calls) {
        await sandbox.mode({ mode, count: 1 });
        await expectConnectorFailure(call(), 'invalid_answer');
      }
    }
    expect((await client.listCards({ issuingAccount: 'acct-shape', limit: 10 }, meta)).data).toHaveLength(2);
  });

  it('refuses a page longer than the limit asked for, a record of another card, and a status answer that did not change, or says so inconsistently (D57)', async () => {
    // Mistakes the sandbox never makes: a plain server answers them, each a valid record otherwise.
    const record = { ...(await sandbox.seed('acct-stub')), issuingAccount: 'acct-stub', requestedCardLimit: 1000, metadata: {} };
    const answers = new Map<string, unknown>([
      ['/v1/cards?issuingAccount=acct-stub&limit=1', { data: [record, { ...record, cardId: 'card_2' }], nextCursor: null }],
      ['/v1/cards?issuingAccount=acct-stub&limit=2', { data: [record, { ...record, cardId: 'card_2' }], nextCursor: null }],
      [`/v1/cards/card_other?issuingAccount=acct-stub`, record],
      [`/v1/cards/${record.cardId}?issuingAccount=acct-stub`, record],
      [`/v1/cards/${record.cardId}/status`, { ...record, previousStatus: 'active', changed: false }],
      [`/v1/cards/card_inconsistent/status`, { ...record, cardId: 'card_inconsistent', previousStatus: 'inactive', changed: false }],
      [`/v1/cards/card_silent/status`, { ...record, cardId: 'card_silent' }],
    ]);
    const server = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers.get(request.url ?? '') ?? {}));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const stub = createConnectorClient({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      timeoutMs: 5000,
      connections: 1,
      maxAnswerBytes: 65_536,
      startSandbox: false,
      tls: undefined,
      sharedSecret: undefined,
    });
    try {
      expect((await stub.listCards({ issuingAccount: 'acct-stub', limit: 2 }, meta)).data).toHaveLength(2);
      await expectConnectorFailure(stub.listCards({ issuingAccount: 'acct-stub', limit: 1 }, meta), 'invalid_answer');
      expect(await stub.getCard('acct-stub', record.cardId, meta)).toEqual(record);
      await expectConnectorFailure(stub.getCard('acct-stub', 'card_other', meta), 'invalid_answer');
      expect(await stub.setCardStatus(record.cardId, { issuingAccount: 'acct-stub', status: 'active' }, meta)).toEqual({
        outcome: 'updated',
        card: record,
        previousStatus: 'active',
        changed: false,
      });
      // The card is not in the status asked for; changed contradicts previousStatus; neither is said.
      await expectConnectorFailure(stub.setCardStatus(record.cardId, { issuingAccount: 'acct-stub', status: 'inactive' }, meta), 'invalid_answer');
      await expectConnectorFailure(stub.setCardStatus('card_inconsistent', { issuingAccount: 'acct-stub', status: 'active' }, meta), 'invalid_answer');
      await expectConnectorFailure(stub.setCardStatus('card_silent', { issuingAccount: 'acct-stub', status: 'active' }, meta), 'invalid_answer');
    } finally {
      await stub.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a 5xx, and a 4xx that refuses the gateway, are status failures; a 4xx about the card id is not found (D60); the canceled 409 is an answer', async () => {
    const card = await sandbox.seed('acct-fail');
    await sandbox.mode({ mode: 'fail', status: 500, count: 3 });
    expect((await expectConnectorFailure(client.getCard('acct-fail', card.cardId, meta), 'status')).message).toBe('connector status 500');
    await expectConnectorFailure(client.listCards({ issuingAccount: 'acct-fail', limit: 1 }, meta), 'status');
    await expectConnectorFailure(client.setCardStatus(card.cardId, { issuingAccount: 'acct-fail', status: 'active' }, meta), 'status');
    await sandbox.mode({ mode: 'fail', status: 409, count: 1 });
    await expectConnectorFailure(client.setCardStatus(card.cardId, { issuingAccount: 'acct-fail', status: 'active' }, meta), 'status');
    await sandbox.mode({ mode: 'fail', status: 404, count: 1 });
    await expectConnectorFailure(client.listCards({ issuingAccount: 'acct-fail', limit: 1 }, meta), 'status');
    for (const status of [400, 404, 410, 414, 422]) {
      await sandbox.mode({ mode: 'fail', status, count: 2 });
      expect(await client.getCard('acct-fail', card.cardId, meta)).toBeNull();
      expect(await client.setCardStatus(card.cardId, { issuingAccount: 'acct-fail', status: 'inactive' }, meta)).toEqual({ outcome: 'not_found' });
    }
    for (const status of [401, 403, 429]) {
      await sandbox.mode({ mode: 'fail', status, count: 2 });
      await expectConnectorFailure(client.getCard('acct-fail', card.cardId, meta), 'status');
      await expectConnectorFailure(client.setCardStatus(card.cardId, { issuingAccount: 'acct-fail', status: 'inactive' }, meta), 'status');
    }
    // The sandbox's router takes every id the contract allows (128 characters): unknown, not a failure.
    for (const cardId of ['c'.repeat(101), 'c'.repeat(128)]) {
      expect(await client.getCard('acct-fail', cardId, meta)).toBeNull();
      expect(await client.setCardStatus(cardId, { issuingAccount: 'acct-fail', status: 'inactive' }, meta)).toEqual({ outcome: 'not_found' });
    }
  });

  it('reset and partial are reset; a refused connection is refused', async () => {
    const card = await sandbox.seed('acct-cut');
    for (const mode of ['reset', 'partial'] as const) {
      await sandbox.mode({ mode, count: 1 });
      await expectConnectorFailure(client.getCard('acct-cut', card.cardId, meta), 'reset');
      await sandbox.mode({ mode, count: 1 });
      await expectConnectorFailure(client.listCards({ issuingAccount: 'acct-cut', limit: 1 }, meta), 'reset');
    }
    const nowhere = createConnectorClient({
      url: `http://127.0.0.1:${await freePort()}`,
      timeoutMs: 5000,
      connections: 1,
      maxAnswerBytes: 65_536,
      startSandbox: false,
      tls: undefined,
      sharedSecret: undefined,
    });
    try {
      await expectConnectorFailure(nowhere.listCards({ issuingAccount: 'acct-cut', limit: 1 }, meta), 'refused');
    } finally {
      await nowhere.close();
    }
  });

  it('a delayed or dripping answer is a timeout at connector.timeoutMs, and the pool serves the next call', async () => {
    const card = await sandbox.seed('acct-slow');
    const impatient = await sandbox.client({ timeoutMs: 300, connections: 1 });
    await sandbox.mode({ mode: 'delay', delayMs: 60_000, count: 1 });
    await expectConnectorFailure(impatient.getCard('acct-slow', card.cardId, meta), 'timeout');
    await sandbox.mode({ mode: 'drip', delayMs: 100, count: 1 });
    await expectConnectorFailure(impatient.listCards({ issuingAccount: 'acct-slow', limit: 1 }, meta), 'timeout');
    await sandbox.mode({ mode: 'delay', delayMs: 60_000, count: 1 });
    await expectConnectorFailure(impatient.setCardStatus(card.cardId, { issuingAccount: 'acct-slow', status: 'inactive' }, meta), 'timeout');
    // delay applies the change before it answers late, as creation makes the card first.
    expect((await impatient.getCard('acct-slow', card.cardId, meta))?.status).toBe('inactive');
  });

  it('takes an answer of exactly maxAnswerBytes and refuses one byte more as invalid_answer', async () => {
    for (let i = 0; i < 100; i += 1) await sandbox.seed('acct-size');
    const raw = await sandbox.connector.app.inject({
      method: 'GET',
      url: '/v1/cards?issuingAccount=acct-size&limit=100',
      headers: { 'x-gateway-secret': SANDBOX_SECRET },
    });
    const bytes = Buffer.byteLength(raw.body);
    expect(bytes).toBeGreaterThan(30_000);
    const exact = await sandbox.client({ maxAnswerBytes: bytes });
    expect((await exact.listCards({ issuingAccount: 'acct-size', limit: 100 }, meta)).data).toHaveLength(100);
    const under = await sandbox.client({ maxAnswerBytes: bytes - 1 });
    await expectConnectorFailure(under.listCards({ issuingAccount: 'acct-size', limit: 100 }, meta), 'invalid_answer');
    const card = JSON.parse(raw.body) as { data: Array<{ cardId: string }> };
    const one = await sandbox.connector.app.inject({
      method: 'GET',
      url: `/v1/cards/${card.data[0]!.cardId}?issuingAccount=acct-size`,
      headers: { 'x-gateway-secret': SANDBOX_SECRET },
    });
    const small = await sandbox.client({ maxAnswerBytes: Buffer.byteLength(one.body) - 1 });
    await expectConnectorFailure(small.getCard('acct-size', card.data[0]!.cardId, meta), 'invalid_answer');
  });

  it('without the shared secret every lifecycle call is a status failure (the connector’s 401)', async () => {
    const card = await sandbox.seed('acct-secret');
    const stranger = await sandbox.client({ sharedSecret: 'wrong-secret' });
    const error = await expectConnectorFailure(stranger.getCard('acct-secret', card.cardId, meta), 'status');
    expect(error.message).toBe('connector status 401');
    await expectConnectorFailure(stranger.listCards({ issuingAccount: 'acct-secret', limit: 1 }, meta), 'status');
    await expectConnectorFailure(stranger.setCardStatus(card.cardId, { issuingAccount: 'acct-secret', status: 'canceled' }, meta), 'status');
  });
});
