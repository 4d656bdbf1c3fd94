import { describe, it, expect, afterEach } from 'vitest';
import { waitFor } from '../support/wait.js';
import type { FastifyInstance } from 'fastify';
import { isLuhnValid, luhnCheckDigit } from '../../src/connector/sandbox/luhn.js';
import {
  buildSandboxConnector,
  startSandboxConnector,
  type RunningSandboxConnector,
  type SandboxConnectorOptions,
  type SandboxStats,
} from '../../src/connector/sandbox/sandbox-connector.js';

const apps: FastifyInstance[] = [];
const servers: RunningSandboxConnector[] = [];

afterEach(async () => {
  await Promise.all([...apps.splice(0).map((a) => a.close()), ...servers.splice(0).map((s) => s.close())]);
});

function build(opts: SandboxConnectorOptions = {}): FastifyInstance {
  const app = buildSandboxConnector({ controls: true, ...opts });
  apps.push(app);
  return app;
}

async function start(): Promise<RunningSandboxConnector> {
  const running = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  servers.push(running);
  return running;
}

let seq = 0;
function cardBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  seq += 1;
  return {
    requestId: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
    issuingAccount: 'acct-1',
    requestedCardLimit: 1000,
    cardLimit: 1100,
    currency: 'EUR',
    config: { expiryDuration: 24, cardType: 'virtual' },
    metadata: { team: 'qa' },
    ...overrides,
  };
}

const keyOf = (body: Record<string, unknown>): string => `${String(body['issuingAccount'])}:${String(body['requestId'])}`;

function postCard(app: FastifyInstance, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url: '/v1/cards',
    headers: { 'idempotency-key': keyOf(body), 'x-correlation-id': 'corr-1', ...headers },
    payload: body,
  });
}

async function setMode(app: FastifyInstance, payload: Record<string, unknown>): Promise<void> {
  const res = await app.inject({ method: 'POST', url: '/__control/mode', payload });
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({ ok: true });
}

async function stats(app: FastifyInstance): Promise<SandboxStats> {
  return (await app.inject({ method: 'GET', url: '/__control/stats' })).json<SandboxStats>();
}

describe('luhn', () => {
  it('computes check digits of known numbers', () => {
    expect(luhnCheckDigit('7992739871')).toBe('3');
    expect(luhnCheckDigit('400000000000000')).toBe('2');
    expect(isLuhnValid('79927398713')).toBe(true);
    expect(isLuhnValid('4242424242424242')).toBe(true);
    expect(isLuhnValid('4242424242424241')).toBe(false);
    expect(isLuhnValid('42a2')).toBe(false);
    expect(() => luhnCheckDigit('12x')).toThrow(TypeError);
  });
});

describe('sandbox connector contract', () => {
  it('creates a 201 card with a Luhn-valid PAN on the BIN', async () => {
    const app = build({ binPrefix: '411111' });
    const body = cardBody();
    const res = await postCard(app, body);
    expect(res.statusCode).toBe(201);
    const card = res.json<Record<string, unknown>>();
    expect(Object.keys(card).sort()).toEqual(['cardId', 'pan', 'cvc', 'expMonth', 'expYear', 'status', 'cardLimit', 'currency', 'createdAt'].sort());
    expect(card['cardId']).toMatch(/^card_[0-9a-f]{24}$/);
    expect(card['pan']).toMatch(/^411111\d{10}$/);
    expect(isLuhnValid(String(card['pan']))).toBe(true);
    expect(card['cvc']).toMatch(/^\d{3}$/);
    expect(card['status']).toBe('active');
    expect(card['cardLimit']).toBe(1100);
    expect(card['currency']).toBe('EUR');
    expect(new Date(String(card['createdAt'])).toISOString()).toBe(card['createdAt']);
  });

  it('derives the expiry from now() and expiryDuration, wrapping the year', async () => {
    const app = build({ now: () => Date.UTC(2026, 10, 22, 12, 0, 0) }); // November 2026
    const wrapped = (await postCard(app, cardBody({ config: { expiryDuration: 2 } }))).json<Record<string, unknown>>();
    expect([wrapped['expMonth'], wrapped['expYear']]).toEqual([1, 2027]);
    expect(wrapped['createdAt']).toBe('2026-11-22T12:00:00.000Z');
    const same = (await postCard(app, cardBody({ config: { expiryDuration: 1 } }))).json<Record<string, unknown>>();
    expect([same['expMonth'], same['expYear']]).toEqual([12, 2026]);
    const byDefault = (await postCard(app, cardBody({ config: {} }))).json<Record<string, unknown>>();
    expect([byDefault['expMonth'], byDefault['expYear']]).toEqual([11, 2029]);
    const longest = (await postCard(app, cardBody({ config: { expiryDuration: 60 } }))).json<Record<string, unknown>>();
    expect([longest['expMonth'], longest['expYear']]).toEqual([11, 2031]);
  });

  it('replays a known key with 200 and the same card', async () => {
    const app = build();
    const body = cardBody();
    const first = await postCard(app, body);
    const second = await postCard(app, { ...body, cardLimit: 5 });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json()).toEqual(first.json());
    expect((await stats(app)).cardsCreated).toBe(1);
  });

  it('creates one card for 50 concurrent requests with one key', async () => {
    const app = build();
    const body = cardBody();
    const answers = await Promise.all(Array.from({ length: 50 }, () => postCard(app, body)));
    expect(answers.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(49);
    expect(new Set(answers.map((r) => r.json<{ cardId: string }>().cardId)).size).toBe(1);
    const s = await stats(app);
    expect(s.cardsCreated).toBe(1);
    expect(s.keys).toEqual([keyOf(body)]);
  });

  it('creates different cards for different keys', async () => {
    const app = build();
    const a = (await postCard(app, cardBody())).json<{ cardId: string; pan: string }>();
    const b = (await postCard(app, cardBody())).json<{ cardId: string; pan: string }>();
    expect(a.cardId).not.toBe(b.cardId);
    expect(a.pan).not.toBe(b.pan);
  });

  it('rejects requests without Idempotency-Key or with a malformed body with 400', async () => {
    const app = build();
    const body = cardBody();
    const noKey = await app.inject({ method: 'POST', url: '/v1/cards', payload: body });
    expect(noKey.statusCode).toBe(400);
    expect(noKey.json<{ message: string }>().message).toMatch(/Idempotency-Key/);
    const invalid: Array<Record<string, unknown>> = [
      { cardLimit: 0 },
      { cardLimit: 1.5 },
      { cardLimit: '100' },
      { currency: 'eu' },
      { requestId: 7 },
      { config: { expiryDuration: 61 } },
    ];
    for (const overrides of invalid) {
      const res = await postCard(app, { ...cardBody(), ...overrides });
      expect(res.statusCode, JSON.stringify(overrides)).toBe(400);
      expect(typeof res.json<{ message: unknown }>().message).toBe('string');
    }
    const wrongKey = await postCard(app, body, { 'idempotency-key': 'other:key' });
    expect(wrongKey.statusCode).toBe(400);
    const notObject = await app.inject({
      method: 'POST',
      url: '/v1/cards',
      headers: { 'idempotency-key': 'a:b', 'content-type': 'application/json' },
      payload: '[1]',
    });
    expect(notObject.statusCode).toBe(400);
    const plain = await app.inject({
      method: 'POST',
      url: '/v1/cards',
      headers: { 'idempotency-key': keyOf(body), 'content-type': 'text/plain' },
      payload: JSON.stringify(body),
    });
    expect(plain.statusCode).toBe(415);
    expect(typeof plain.json<{ message: unknown }>().message).toBe('string');
    expect((await stats(app)).cardsCreated).toBe(0);
  });

  it('enforces the shared secret when configured', async () => {
    const app = build({ sharedSecret: 's3cret-value' });
    const body = cardBody();
    const missing = await postCard(app, body);
    expect(missing.statusCode).toBe(401);
    expect(typeof missing.json<{ message: unknown }>().message).toBe('string');
    expect((await postCard(app, body, { 'x-gateway-secret': 's3cret-valuX' })).statusCode).toBe(401);
    expect((await postCard(app, body, { 'x-gateway-secret': 'short' })).statusCode).toBe(401);
    expect((await postCard(app, body, { 'x-gateway-secret': 's3cret-value' })).statusCode).toBe(201);
    expect((await stats(app)).cardsCreated).toBe(1);
  });

  it('answers /health and turns unhealthy on request while still creating cards', async () => {
    const app = build();
    const ok = await app.inject({ method: 'GET', url: '/health' });
    expect([ok.statusCode, ok.json()]).toEqual([200, { status: 'ok' }]);
    await setMode(app, { mode: 'unhealthy' });
    const down = await app.inject({ method: 'GET', url: '/health' });
    expect([down.statusCode, down.json()]).toEqual([503, { status: 'unavailable' }]);
    expect((await postCard(app, cardBody())).statusCode).toBe(201);
    await setMode(app, { mode: 'normal' });
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
  });

  it('has no control routes unless enabled', async () => {
    const app = buildSandboxConnector();
    apps.push(app);
    for (const [method, url] of [
      ['POST', '/__control/mode'],
      ['GET', '/__control/stats'],
      ['POST', '/__control/reset'],
    ] as const) {
      const res = await app.inject({ method, url, payload: method === 'POST' ? { mode: 'fail' } : undefined });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ message: 'not found' });
    }
  });
});

describe('sandbox connector controls', () => {
  it('fail answers the chosen status, creates nothing, and count limits it', async () => {
    const app = build();
    await setMode(app, { mode: 'fail', status: 503, count: 2 });
    const body = cardBody();
    for (let i = 0; i < 2; i += 1) {
      const res = await postCard(app, body);
      expect([res.statusCode, res.json()]).toEqual([503, { message: 'sandbox failure' }]);
    }
    expect((await stats(app)).cardsCreated).toBe(0);
    expect((await postCard(app, body)).statusCode).toBe(201);
  });

  it('fail defaults to 500 and lasts until changed', async () => {
    const app = build();
    await setMode(app, { mode: 'fail' });
    for (let i = 0; i < 3; i += 1) expect((await postCard(app, cardBody())).statusCode).toBe(500);
    await setMode(app, { mode: 'normal' });
    expect((await postCard(app, cardBody())).statusCode).toBe(201);
  });

  it('garbage answers 201 JSON content type with a body that is not JSON', async () => {
    const app = build();
    await setMode(app, { mode: 'garbage', count: 1 });
    const res = await postCard(app, cardBody());
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(() => JSON.parse(res.body) as unknown).toThrow();
    expect((await stats(app)).cardsCreated).toBe(0);
  });

  it('wrong-shape answers 201 with JSON that is not a card', async () => {
    const app = build();
    await setMode(app, { mode: 'wrong-shape', count: 1 });
    const res = await postCard(app, cardBody());
    expect([res.statusCode, res.json()]).toEqual([201, { cardId: 42 }]);
    expect((await stats(app)).cardsCreated).toBe(0);
  });

  it('delay creates the card first and answers later', async () => {
    const app = build();
    // Longer than the test's hang guard: the first answer comes only when the app closes.
    await setMode(app, { mode: 'delay', delayMs: 600_000, count: 1 });
    const body = cardBody();
    const events: string[] = [];
    const pending = postCard(app, body).then((answer) => {
      events.push('first answered');
      return answer;
    });
    // The card exists while its answer is still held: a replay of the key finds it.
    await waitFor('the delayed card to be created', async () => (await stats(app)).cardsCreated === 1);
    const replay = await postCard(app, body);
    expect(replay.statusCode).toBe(200);
    expect(events, 'the first answer is still held').toEqual([]);
    await app.close();
    const first = await pending;
    expect(first.statusCode).toBe(201);
    expect(replay.json()).toEqual(first.json());
  });

  it('rejects an unknown mode or bad parameters with 400', async () => {
    const app = build();
    for (const payload of [{ mode: 'explode' }, { mode: 'fail', status: 200 }, { mode: 'delay', delayMs: -1 }, { mode: 'fail', count: 0 }]) {
      const res = await app.inject({ method: 'POST', url: '/__control/mode', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(typeof res.json<{ message: unknown }>().message).toBe('string');
    }
  });

  it('stats record the last request and reset clears everything', async () => {
    const app = build({ sharedSecret: 'abc' });
    const body = cardBody();
    await postCard(app, body, { 'x-gateway-secret': 'abc' });
    await postCard(app, body, { 'x-gateway-secret': 'abc' });
    await setMode(app, { mode: 'fail' });
    let s = await stats(app);
    expect(s.cardsCreated).toBe(1);
    expect(s.requestsReceived).toBe(2);
    expect(s.keys).toEqual([keyOf(body)]);
    expect(s.lastBody).toEqual(body);
    expect(s.lastHeaders?.['idempotency-key']).toBe(keyOf(body));
    expect(s.lastHeaders?.['x-correlation-id']).toBe('corr-1');
    expect(s.lastHeaders?.['authorization']).toBeUndefined();

    const reset = await app.inject({ method: 'POST', url: '/__control/reset' });
    expect(reset.statusCode).toBe(200);
    s = await stats(app);
    expect(s).toEqual({ cardsCreated: 0, requestsReceived: 0, lastHeaders: null, lastBody: null, keys: [], received: [] });
    // The mode went back to normal, and the old key creates a fresh card.
    expect((await postCard(app, body, { 'x-gateway-secret': 'abc' })).statusCode).toBe(201);
  });
});

describe('sandbox connector over a real socket', () => {
  it('records each request line and header set, query string included, in arrival order', async () => {
    const connector = await start();
    const body = cardBody();
    await fetch(`${connector.url}/v1/cards?leak=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body), 'x-extra': 'seen' },
      body: JSON.stringify(body),
    });
    const s = (await (await fetch(`${connector.url}/__control/stats`)).json()) as SandboxStats;
    expect(s.received).toHaveLength(1);
    expect(s.received[0]).toMatchObject({ method: 'POST', url: '/v1/cards?leak=1', headers: { 'x-extra': 'seen' } });
  });

  it('drip sends the status and headers at once, then the body a byte at a time', async () => {
    const connector = await start();
    await fetch(`${connector.url}/__control/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'drip', delayMs: 200, count: 1 }),
    });
    const body = cardBody();
    const response = await fetch(`${connector.url}/v1/cards`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body) },
      body: JSON.stringify(body),
    });
    // The status and headers are here while the body has barely begun: read three pieces of it.
    expect(response.status).toBe(201);
    const reader = response.body!.getReader();
    const pieces: number[] = [];
    for (let read = 0; read < 3; read += 1) {
      const { value, done } = await reader.read();
      expect(done, 'the body ended after a few bytes').toBe(false);
      pieces.push(value!.length);
    }
    await reader.cancel();
    // Counted in bytes, not timed: the card (far more than 12 bytes) arrives a byte or so per read.
    expect(pieces.every((length) => length >= 1)).toBe(true);
    expect(pieces.reduce((sum, length) => sum + length, 0)).toBeLessThan(12);
  });

  it('reset destroys the connection without an answer', async () => {
    const connector = await start();
    await fetch(`${connector.url}/__control/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'reset', count: 1 }),
    });
    const body = cardBody();
    const request = fetch(`${connector.url}/v1/cards`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body) },
      body: JSON.stringify(body),
    });
    await expect(request).rejects.toThrow();
    const s = (await (await fetch(`${connector.url}/__control/stats`)).json()) as SandboxStats;
    expect(s.cardsCreated).toBe(0);
    expect(s.requestsReceived).toBe(1);
  });

  it('partial sends headers and a cut body, then closes', async () => {
    const connector = await start();
    await fetch(`${connector.url}/__control/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'partial', count: 1 }),
    });
    const body = cardBody();
    const read = (async () => {
      const res = await fetch(`${connector.url}/v1/cards`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body) },
        body: JSON.stringify(body),
      });
      return res.text();
    })();
    await expect(read).rejects.toThrow();
    const s = (await (await fetch(`${connector.url}/__control/stats`)).json()) as SandboxStats;
    expect(s.cardsCreated).toBe(0);
  });

  it('delay leaves a card behind a client timeout; the retry is a 200 replay', async () => {
    const connector = await start();
    await fetch(`${connector.url}/__control/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'delay', delayMs: 200, count: 1 }),
    });
    const body = cardBody();
    const send = (signal?: AbortSignal) =>
      fetch(`${connector.url}/v1/cards`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body) },
        body: JSON.stringify(body),
        ...(signal ? { signal } : {}),
      });
    await expect(send(AbortSignal.timeout(50))).rejects.toThrow();
    const retry = await send();
    expect(retry.status).toBe(200);
    const card = (await retry.json()) as { cardId: string };
    expect(card.cardId).toMatch(/^card_/);
    const s = (await (await fetch(`${connector.url}/__control/stats`)).json()) as SandboxStats;
    expect(s.cardsCreated).toBe(1);
    expect(s.keys).toEqual([keyOf(body)]);
  });

  it('close answers a pending delayed request at once instead of waiting it out', async () => {
    const connector = await start();
    await fetch(`${connector.url}/__control/mode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // Longer than the test's hang guard: only close() can answer it before the test fails.
      body: JSON.stringify({ mode: 'delay', delayMs: 600_000 }),
    });
    const body = cardBody();
    const pending = fetch(`${connector.url}/v1/cards`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(body) },
      body: JSON.stringify(body),
    });
    // Wait until the request has reached the connector and is being held.
    while ((await connector.app.inject({ method: 'GET', url: '/__control/stats' })).json<SandboxStats>().cardsCreated === 0) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    await connector.close();
    const res = await pending;
    expect(res.status).toBe(201);
    expect(((await res.json()) as { cardId: string }).cardId).toMatch(/^card_/);
  });

  it('reports the bound address and answers /health', async () => {
    const connector = await start();
    expect(connector.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${connector.url}/health`);
    expect([res.status, await res.json()]).toEqual([200, { status: 'ok' }]);
  });
});
