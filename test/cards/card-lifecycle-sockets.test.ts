import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { waitFor } from '../support/wait.js';
import { mintToken } from '../support/card-fixture.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { LIFECYCLE_CREDENTIALS } from '../support/lifecycle-fixture.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, startProcess, type RunningProcess } from '../support/process.js';
import { createTestRedisStore, openReplicaStore, type TestRedisStore } from '../support/redis.js';
import { realRequest, type RealResponse } from '../transport/real-clients.js';

/**
 * The card lifecycle over real sockets: the sandbox connector as a separate process, two gateway
 * replicas on one Redis (same prefix), each on its own TLS listener, and a client speaking HTTPS
 * to them. One replica's change is the other's read at once (the gateway keeps no card state of
 * its own); pages stay stable while cards are created; the connector's outages are creation's
 * 502 and 504.
 */

const CARDS = '/api/v1/issuing/cards';
let connectorPort: number;
let connector: RunningProcess;
let shared: TestRedisStore;
let secondStore: RedisStore;
const replicas: { gw: TestGateway; running: RunningGateway }[] = [];
let ca: string;

async function startReplica(store: RedisStore, clock: ManualClock, timeoutMs = 3000): Promise<{ gw: TestGateway; running: RunningGateway }> {
  const gw = await createTestGateway({
    store,
    clock,
    credentials: LIFECYCLE_CREDENTIALS,
    overrides: {
      trustedProxies: [],
      // One test client stands for many: the per-address budgets (D53) are not under test here.
      limits: { perAddress: { requestsPerSecond: 100_000, inFlight: 10_000, connectionsPerSecond: 100_000 } },
      connector: { url: `http://127.0.0.1:${connectorPort}`, timeoutMs },
      rateLimits: {
        login: { points: 1000, windowSeconds: 60 },
        refresh: { points: 1000, windowSeconds: 60 },
        cardReads: { points: 10_000, windowSeconds: 60 },
        cardStatusChanges: { points: 1000, windowSeconds: 60 },
      },
    },
  });
  const running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
  const replica = { gw, running };
  replicas.push(replica);
  return replica;
}

async function control(path: string, body: Record<string, unknown> = {}): Promise<void> {
  const response = await realRequest(`http://127.0.0.1:${connectorPort}${path}`, { method: 'POST', body: JSON.stringify(body) });
  expect(response.status, response.body).toBe(200);
}

function call(replica: { running: RunningGateway }, token: string, method: string, path: string, body?: unknown): Promise<RealResponse> {
  return realRequest(`${replica.running.httpsUrl}${path}`, {
    method,
    ca,
    headers: { authorization: `Bearer ${token}` },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

const json = <T>(response: RealResponse): T => JSON.parse(response.body) as T;

let a: { gw: TestGateway; running: RunningGateway };
let b: { gw: TestGateway; running: RunningGateway };

beforeAll(async () => {
  ca = await testCertificatePem();
  const built = await builtEntryPoints();
  connectorPort = await freePort();
  connector = startProcess(process.execPath, [built.connectorJs], {
    env: { SANDBOX_CONNECTOR_PORT: String(connectorPort), SANDBOX_CONNECTOR_CONTROLS: 'true', SANDBOX_CONNECTOR_SECRET: '' },
  });
  await waitFor('the sandbox connector process to listen', () => connector.lines.some((line) => line.includes('listening on')));
  shared = await createTestRedisStore('lifecycle-sockets');
  secondStore = await openReplicaStore(shared.prefix);
  const clock = new ManualClock();
  a = await startReplica(shared.store, clock);
  b = await startReplica(secondStore, clock);
}, 200_000);

afterAll(async () => {
  for (const { gw, running } of replicas.splice(0)) {
    await running.close();
    await gw.close();
  }
  await secondStore?.close();
  await shared?.cleanup();
  await connector?.kill();
});

async function createThrough(replica: { running: RunningGateway }, token: string, currency = 'EUR'): Promise<string> {
  const response = await call(replica, token, 'POST', CARDS, { requestId: randomUUID(), cardLimit: 10_000, currency });
  expect(response.status, response.body).toBe(201);
  return json<{ cardId: string }>(response).cardId;
}

describe('two replicas, one Redis, the sandbox connector as its own process', () => {
  it('one replica freezes a card and the other reads it inactive at once; canceled is final on both', async () => {
    const [tokenA, tokenB] = [await mintToken(a.gw, 'life'), await mintToken(b.gw, 'peer')];
    const cardId = await createThrough(a, tokenA);
    expect(json<{ status: string }>(await call(b, tokenB, 'GET', `${CARDS}/${cardId}`)).status).toBe('active');

    const frozen = await call(a, tokenA, 'PATCH', `${CARDS}/${cardId}`, { status: 'inactive', reason: 'lost' });
    expect(frozen.status, frozen.body).toBe(200);
    const read = await call(b, tokenB, 'GET', `${CARDS}/${cardId}`);
    expect(read.status).toBe(200);
    expect(json<{ status: string; pan: string }>(read)).toMatchObject({ status: 'inactive', pan: expect.stringMatching(/^\*+\d{4}$/) });
    const listed = json<{ data: { cardId: string }[] }>(await call(b, tokenB, 'GET', `${CARDS}?status=inactive&limit=100`));
    expect(listed.data.map((card) => card.cardId)).toContain(cardId);

    expect((await call(b, tokenB, 'PATCH', `${CARDS}/${cardId}`, { status: 'canceled' })).status).toBe(200);
    const refused = await call(a, tokenA, 'PATCH', `${CARDS}/${cardId}`, { status: 'active' });
    expect(refused.status).toBe(409);
    expect(json<{ code: string }>(refused).code).toBe('card_canceled');
    expect((await call(a, tokenA, 'PATCH', `${CARDS}/${cardId}`, { status: 'canceled' })).status).toBe(200);
    // Only the creator reveals, on either replica (creation's record is shared).
    expect((await call(b, await mintToken(b.gw, 'life'), 'GET', `${CARDS}/${cardId}?revealDetails=true`)).status).toBe(200);
    expect(json<{ code: string }>(await call(a, tokenB, 'GET', `${CARDS}/${cardId}?revealDetails=true`)).code).toBe('permission_denied');
  });

  it("A's unknown ids and B's cards answer alike over the wire (bodies and headers, apart from per-request values)", async () => {
    const token = await mintToken(a.gw, 'life');
    const foreign = await createThrough(b, await mintToken(b.gw, 'life-uk'), 'GBP');
    const perRequest = new Set(['x-correlation-id', 'date', 'ratelimit', 'ratelimit-remaining']);
    const comparable = (response: RealResponse) => {
      const { correlationId: _c, timestamp: _t, ...body } = json<Record<string, unknown>>(response);
      return { status: response.status, body, headers: Object.fromEntries(Object.entries(response.headers).filter(([name]) => !perRequest.has(name))) };
    };
    const unknown = comparable(await call(a, token, 'GET', `${CARDS}/${foreign.replace(/.$/, (last) => (last === '0' ? '1' : '0'))}`));
    expect(unknown.status).toBe(404);
    expect(comparable(await call(a, token, 'GET', `${CARDS}/${foreign}`))).toEqual(unknown);
    expect(comparable(await call(a, token, 'GET', `${CARDS}/${encodeURIComponent('no such/id')}`))).toEqual(unknown);
  });

  it('pages of 100 while 250 cards are created: every card that existed at the first page is seen once, newest first', async () => {
    // An account of its own, so that the other tests' cards do not count.
    const token = await mintToken(a.gw, 'life-uk');
    const writer = await mintToken(b.gw, 'life-uk');
    const before: string[] = [];
    for (let batch = 0; batch < 15; batch += 1) before.push(...(await Promise.all(Array.from({ length: 10 }, () => createThrough(b, writer, 'GBP')))));
    const existing = new Set(before);
    const seen: { cardId: string; createdAt: string }[] = [];
    let cursor: string | null = null;
    let created = 0;
    let pages = 0;
    do {
      // Cards are created while the page is read, on the other replica.
      const creating = Promise.all(Array.from({ length: 84 }, () => createThrough(b, writer, 'GBP')));
      const response = await call(a, token, 'GET', `${CARDS}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      created += (await creating).length;
      expect(response.status, response.body).toBe(200);
      const page = json<{ data: { cardId: string; createdAt: string }[]; nextCursor: string | null }>(response);
      seen.push(...page.data);
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 10);
    while (created < 250) created += (await Promise.all(Array.from({ length: Math.min(84, 250 - created) }, () => createThrough(b, writer, 'GBP')))).length;
    expect(cursor).toBeNull();
    const ids = seen.map((card) => card.cardId);
    expect(new Set(ids).size, 'no card twice').toBe(ids.length);
    for (const id of existing)
      expect(
        ids.filter((seenId) => seenId === id),
        id,
      ).toHaveLength(1);
    const times = seen.map((card) => card.createdAt);
    expect(times).toEqual([...times].sort().reverse());
  }, 120_000);

  it('an unreachable connector is 502 and a slow one 504, for reads, lists and status changes alike', async () => {
    const token = await mintToken(a.gw, 'life');
    const cardId = await createThrough(a, token);
    // Held far past the 3 s deadline (stopping the sandbox process releases them): only the deadline can end each call.
    await control('/__control/mode', { mode: 'delay', delayMs: 600_000, count: 3 });
    for (const [method, path, body] of [
      ['GET', `${CARDS}/${cardId}`, undefined],
      ['GET', CARDS, undefined],
      ['PATCH', `${CARDS}/${cardId}`, { status: 'inactive' }],
    ] as const) {
      const response = await call(a, token, method, path, body);
      expect([response.status, json<{ code: string }>(response).code]).toEqual([504, 'connector_timeout']);
    }
    await control('/__control/mode', { mode: 'normal' });
    const deadPort = await freePort();
    const offline = await createTestGateway({
      credentials: LIFECYCLE_CREDENTIALS,
      overrides: { trustedProxies: [], connector: { url: `http://127.0.0.1:${deadPort}`, timeoutMs: 1000 } },
    });
    const offlineRunning = await listenGateway(offline.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
    replicas.push({ gw: offline, running: offlineRunning });
    const offlineToken = await mintToken(offline, 'life');
    for (const [method, path] of [
      ['GET', `${CARDS}/${cardId}`],
      ['GET', CARDS],
    ] as const) {
      const response = await call({ running: offlineRunning }, offlineToken, method, path);
      expect([response.status, json<{ code: string }>(response).code]).toEqual([502, 'connector_unavailable']);
    }
  });
});

describe('issue 31 over the wire: status changes and list bounds', () => {
  it('a credential with cards:update alone gets the id and the statuses, nothing it may not read (D56)', async () => {
    const cardId = await createThrough(a, await mintToken(a.gw, 'life'));
    const updater = await mintToken(b.gw, 'updater');
    const frozen = await call(b, updater, 'PATCH', `${CARDS}/${cardId}`, { status: 'inactive', reason: 'lost' });
    expect(frozen.status, frozen.body).toBe(200);
    expect(json(frozen)).toEqual({ cardId, status: 'inactive', previousStatus: 'active' });
    expect(frozen.body).not.toMatch(/pan|metadata|cardLimit/);
    const whole = await call(a, await mintToken(a.gw, 'life'), 'PATCH', `${CARDS}/${cardId}`, { status: 'inactive' });
    expect(json(whole)).toMatchObject({
      cardId,
      status: 'inactive',
      previousStatus: 'inactive',
      pan: expect.stringMatching(/^\*+\d{4}$/) as unknown as string,
    });
  });

  it('two concurrent cancels on two replicas: one connector call each, nothing read first, audited once changed and once not (D57)', async () => {
    const [tokenA, tokenB] = [await mintToken(a.gw, 'life'), await mintToken(b.gw, 'peer')];
    const cards: string[] = [];
    for (let i = 0; i < 8; i += 1) cards.push(await createThrough(a, tokenA));
    for (const cardId of cards) {
      const answers = await Promise.all([
        call(a, tokenA, 'PATCH', `${CARDS}/${cardId}`, { status: 'canceled', reason: 'race A' }),
        call(b, tokenB, 'PATCH', `${CARDS}/${cardId}`, { status: 'canceled', reason: 'race B' }),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
      expect(answers.map((answer) => json<{ previousStatus: string }>(answer).previousStatus).sort()).toEqual(['active', 'canceled']);
    }
    const received = (await realRequest(`http://127.0.0.1:${connectorPort}/__control/stats`, { method: 'GET' })).body;
    const urls = (JSON.parse(received) as { received: { method: string; url: string }[] }).received;
    for (const cardId of cards) {
      expect(urls.filter((request) => request.method === 'POST' && request.url === `/v1/cards/${cardId}/status`)).toHaveLength(2);
      expect(urls.filter((request) => request.method === 'GET' && request.url.startsWith(`/v1/cards/${cardId}?`))).toEqual([]);
      const audited = [...a.gw.audit.events(), ...b.gw.audit.events()].filter(
        (event) => event.cardId === cardId && String(event.event).startsWith('card.status_change'),
      );
      expect(audited.map((event) => [event.event, event.from, event.to, event.changed]).sort()).toEqual([
        ['card.status_change_requested', 'canceled', 'canceled', false],
        ['card.status_changed', 'active', 'canceled', true],
      ]);
    }
  });

  it('createdAfter and createdBefore are inclusive through the gateway and the sandbox connector, to the millisecond (D61)', async () => {
    const token = await mintToken(a.gw, 'life');
    const cardId = await createThrough(a, token);
    const createdAt = json<{ createdAt: string }>(await call(a, token, 'GET', `${CARDS}/${cardId}`)).createdAt;
    const shifted = (ms: number) => encodeURIComponent(new Date(Date.parse(createdAt) + ms).toISOString());
    const at = encodeURIComponent(createdAt);
    const listed = async (query: string) => {
      const response = await call(b, token, 'GET', `${CARDS}?limit=100&${query}`);
      expect(response.status, response.body).toBe(200);
      return json<{ data: { cardId: string }[] }>(response).data.some((card) => card.cardId === cardId);
    };
    expect(await listed(`createdAfter=${at}&createdBefore=${at}`)).toBe(true);
    expect(await listed(`createdAfter=${at}`)).toBe(true);
    expect(await listed(`createdBefore=${at}`)).toBe(true);
    expect(await listed(`createdAfter=${shifted(1)}`)).toBe(false);
    expect(await listed(`createdBefore=${shifted(-1)}`)).toBe(false);
  });
});
