import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import selfsigned from 'selfsigned';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, CardGatewayClient, CertificateError, NetworkError, SessionEndedError } from '../src/index.js';
import { cardInput, PASSWORD, rejectionOf, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * createCard against a real gateway over TLS and a real sandbox connector: the requestId is
 * generated once and reused by every retry, so timeouts and retryable statuses never make a
 * second card; Retry-After is honoured; final 4xx are never retried.
 */

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CARDS_ROUTE = '/api/v1/issuing/cards';

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('createCard against a real gateway', () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  it('generates the requestId, masks by default, and replays or reveals with the same requestId', async () => {
    g = await startRealGateway();
    const client = g.client();
    await client.login('full', PASSWORD);

    const created = await client.createCard(cardInput());
    expect(created.requestId).toMatch(UUID_V4);
    expect(created).toMatchObject({ replayed: false, payloadMismatch: false, attempts: 1 });
    expect(created.card).toMatchObject({ status: 'active', requestedCardLimit: 10_000, cardLimit: 10_500, currency: 'EUR' });
    expect(created.card.pan).toMatch(/^\*{12}\d{4}$/);
    expect(created.card.cvc).toBe('***');
    expect(created.correlationId).toMatch(/^[0-9a-f-]{36}$/);

    const revealed = await client.createCard({ ...cardInput(), requestId: created.requestId }, { revealDetails: true });
    expect(revealed).toMatchObject({ requestId: created.requestId, replayed: true, payloadMismatch: false });
    expect(revealed.card.cardId).toBe(created.card.cardId);
    expect(revealed.card.pan).toMatch(/^400000\d{10}$/);
    expect(revealed.card.pan.slice(-4)).toBe(created.card.pan.slice(-4));
    expect(revealed.card.cvc).toMatch(/^\d{3}$/);

    const differentPayload = await client.createCard({ ...cardInput(), cardLimit: 99, requestId: created.requestId });
    expect(differentPayload).toMatchObject({ replayed: true, payloadMismatch: true });
    expect(differentPayload.card.cardId).toBe(created.card.cardId);
    expect((await g.connectorStats()).cardsCreated).toBe(1);
  });

  it('a connector timeout (504) then success yields exactly one card, seen once by the client', async () => {
    g = await startRealGateway({ connectorTimeoutMs: 300 });
    const client = g.client();
    await client.login('full', PASSWORD);
    // The sandbox creates the card, then answers after the gateway has given up.
    await g.setConnectorMode({ mode: 'delay', delayMs: 1_500, count: 1 });

    const result = await client.createCard(cardInput());

    expect(result.attempts).toBe(2);
    expect(g.retries).toHaveLength(1);
    expect(g.retries[0]).toMatchObject({
      operation: 'createCard',
      attempt: 1,
      requestId: result.requestId,
      error: { code: 'connector_timeout', status: 504, retryable: true },
    });
    const stats = await g.connectorStats();
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(2);
    expect(stats.keys).toHaveLength(1);
    // Both forwards carried the same Idempotency-Key: the client's requestId.
    expect(stats.received.map((request) => request.headers['idempotency-key'])).toEqual([`acct-eu:${result.requestId}`, `acct-eu:${result.requestId}`]);
    // The card the client got is the card the gateway keeps for that requestId.
    const again = await client.createCard({ ...cardInput(), requestId: result.requestId });
    expect(again).toMatchObject({ replayed: true, card: { cardId: result.card.cardId } });
    expect(g.auditEvents('card.created')).toHaveLength(1);
  });

  it('an answer that does not come in time is retried with the same requestId: one card', async () => {
    g = await startRealGateway({ connectorTimeoutMs: 3_000 });
    // Each attempt gives up after 300 ms; the connector takes 1 s for the first request.
    const client = g.client({ attemptTimeoutMs: 300 });
    await client.login('full', PASSWORD);
    await g.setConnectorMode({ mode: 'delay', delayMs: 1_000, count: 1 });

    const result = await client.createCard(cardInput());

    expect(result.attempts).toBeGreaterThanOrEqual(2);
    expect(g.retries.length).toBe(result.attempts - 1);
    for (const retry of g.retries) {
      expect(retry.error).toBeInstanceOf(NetworkError);
      expect(retry.error).toMatchObject({ code: 'timeout', retryable: true, requestId: result.requestId });
    }
    expect((await g.connectorStats()).cardsCreated).toBe(1);
    expect(g.auditEvents('card.created')).toHaveLength(1);
  });

  it('409 (a duplicate still in progress) is retried with the same requestId until the first finishes: one card for all', async () => {
    // One duplicate may wait for the first in this process; a second duplicate gets 409 at once.
    g = await startRealGateway({ connectorTimeoutMs: 3_000, overrides: { cards: { maxWaitersPerKey: 1 } } });
    const first = g.client();
    const session = await first.login('full', PASSWORD);
    await g.setConnectorMode({ mode: 'delay', delayMs: 800, count: 1 });
    const requestId = randomUUID();
    const original = first.createCard({ ...cardInput(), requestId });
    // Let the original reach the connector before the duplicates arrive.
    for (let i = 0; i < 100 && (await g.connectorStats()).requestsReceived === 0; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await g.connectorStats()).requestsReceived).toBe(1);
    const waiting = g.client({ session }).createCard({ ...cardInput(), requestId });
    for (let i = 0; i < 100 && (await g.metric('gateway_idempotency_waiters')) === 0; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await g.metric('gateway_idempotency_waiters')).toBe(1);
    // This caller's waits take real time too, so the original can finish meanwhile.
    const refusedAtFirst = g.client({
      session,
      sleep: async (ms) => {
        g?.sleeps.push(ms);
        g?.gw.clock.advance(ms);
        await new Promise((resolve) => setTimeout(resolve, 150));
      },
    });
    const results = await Promise.all([original, waiting, refusedAtFirst.createCard({ ...cardInput(), requestId })]);

    expect(new Set(results.map((result) => result.card.cardId)).size).toBe(1);
    expect(results[2]!.attempts).toBeGreaterThanOrEqual(2);
    expect(g.retries.length).toBeGreaterThanOrEqual(1);
    for (const retry of g.retries)
      expect(retry).toMatchObject({ requestId, error: { code: 'idempotency_in_progress', status: 409, retryAfter: 3, retryable: true } });
    expect(g.sleeps.every((ms) => ms >= 3_000)).toBe(true);
    expect((await g.connectorStats()).cardsCreated).toBe(1);
  });

  it('network errors are retried with backoff and reported with the requestId to finish later', async () => {
    g = await startRealGateway();
    const session = await g.client().login('full', PASSWORD);
    const unreachable = g.client({ baseUrl: `https://127.0.0.1:${await closedPort()}`, session, maxAttempts: 3 });

    const error = await rejectionOf(unreachable.createCard(cardInput()));

    expect(error).toBeInstanceOf(NetworkError);
    const network = error as NetworkError;
    expect(network).toMatchObject({ code: 'network_error', retryable: true, attempts: 3, status: undefined });
    expect(network.message).toMatch(/ECONNREFUSED/);
    expect(network.requestId).toMatch(UUID_V4);
    expect(g.retries.map((retry) => retry.requestId)).toEqual([network.requestId, network.requestId]);
    // Equal-jitter backoff: 125-250 ms, then 250-500 ms.
    expect(g.sleeps).toHaveLength(2);
    expect(g.sleeps[0]).toBeGreaterThanOrEqual(125);
    expect(g.sleeps[0]).toBeLessThanOrEqual(250);
    expect(g.sleeps[1]).toBeGreaterThanOrEqual(250);
    expect(g.sleeps[1]).toBeLessThanOrEqual(500);

    // The same requestId through the reachable gateway finishes the job.
    const client = g.client({ session });
    const finished = await client.createCard({ ...cardInput(), requestId: network.requestId! });
    expect(finished).toMatchObject({ requestId: network.requestId, replayed: false });
  });

  it('a certificate the client does not trust fails at once, without retries', async () => {
    g = await startRealGateway();
    const other = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' });
    const client = g.client({ ca: other.cert });
    const error = await rejectionOf(client.login('full', PASSWORD));
    expect(error).toBeInstanceOf(CertificateError);
    expect(error).toMatchObject({ code: 'certificate_error', retryable: false, attempts: 1 });
    expect(g.retries).toEqual([]);
  });

  it('503 is retried after its Retry-After, with the same requestId: one card', async () => {
    g = await startRealGateway();
    const client = g.client();
    await client.login('full', PASSWORD);
    // The audit trail cannot be written: card creation fails closed with 503 (retryAfter 5)
    // until the disk has room again, which here happens while the client waits.
    g.gw.audit.setWritable(false);
    g.onSleep = () => g?.gw.audit.setWritable(true);

    const result = await client.createCard(cardInput());

    expect(result.attempts).toBe(2);
    expect(g.retries).toHaveLength(1);
    const retry = g.retries[0]!;
    expect(retry.error).toBeInstanceOf(ApiError);
    expect(retry.error).toMatchObject({ code: 'audit_unavailable', status: 503, retryAfter: 5, retryable: true, requestId: result.requestId });
    expect(retry.error.correlationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(retry.delayMs).toBeGreaterThanOrEqual(5_000);
    expect(retry.delayMs).toBeLessThan(5_250);
    expect(g.sleeps).toEqual([retry.delayMs]);
    expect((await g.connectorStats()).cardsCreated).toBe(1);
  });

  it('429 is retried after its Retry-After; when the wait would pass the deadline it fails at once', async () => {
    g = await startRealGateway({ overrides: { rateLimits: { login: { points: 1, windowSeconds: 60 }, refresh: { points: 100, windowSeconds: 60 } } } });
    // The login limit (1 per username here) counts fixed minutes of the gateway clock.
    g.gw.clock.set(Math.floor(g.gw.clock.now() / 60_000) * 60_000 + 50_000);
    await g.client().login('full', PASSWORD);

    const impatient = g.client({ deadlineMs: 5_000 });
    const refused = await rejectionOf(impatient.login('full', PASSWORD));
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ code: 'rate_limited', status: 429, retryAfter: 10, retryable: true, attempts: 1 });
    expect(g.retries).toEqual([]);

    const patient = g.client();
    await patient.login('full', PASSWORD);
    expect(g.retries).toHaveLength(1);
    const retry = g.retries[0]!;
    expect(retry).toMatchObject({ operation: 'login', attempt: 1, error: { code: 'rate_limited', status: 429, retryAfter: 10 } });
    expect(retry.delayMs).toBeGreaterThanOrEqual(10_000);
    expect(patient.session).toBeDefined();
    expect(g.auditEvents('login.succeeded')).toHaveLength(2);
    expect(g.auditEvents('login.rate_limited')).toHaveLength(2);
  });

  it('400, 401 and 403 are final: one request each, never retried', async () => {
    g = await startRealGateway();
    const client = g.client();
    await client.login('full', PASSWORD);

    // 400: GBP is not enabled for acct-eu.
    const invalid = await rejectionOf(client.createCard({ ...cardInput(), currency: 'GBP' }));
    expect(invalid).toBeInstanceOf(ApiError);
    expect(invalid).toMatchObject({ code: 'validation_failed', status: 400, retryable: false, attempts: 1 });
    expect((invalid as ApiError).details.fields).toEqual([expect.objectContaining({ path: 'currency' })]);
    expect((invalid as ApiError).requestId).toMatch(UUID_V4);

    // 403: a credential without cards:create, and reveal without cards:reveal.
    const noPermissions = g.client();
    await noPermissions.login('no-perms', PASSWORD);
    await expect(noPermissions.createCard(cardInput())).rejects.toMatchObject({ code: 'permission_denied', status: 403, retryable: false, attempts: 1 });
    const createOnly = g.client();
    await createOnly.login('create-only', PASSWORD);
    await expect(createOnly.createCard(cardInput(), { revealDetails: true })).rejects.toMatchObject({ code: 'permission_denied', status: 403, attempts: 1 });
    // A 403 does not end the session.
    expect(createOnly.session).toBeDefined();
    expect((await createOnly.createCard(cardInput())).attempts).toBe(1);

    // 401: an access token the gateway does not accept ends the session (it cannot be refreshed).
    const session = client.session!;
    const forged = g.client({ session: { ...session, accessToken: `${session.accessToken.slice(0, -4)}AAAA` } });
    const rejected = await rejectionOf(forged.createCard(cardInput()));
    expect(rejected).toBeInstanceOf(SessionEndedError);
    expect(rejected).toMatchObject({ reason: 'access_rejected', gatewayCode: 'token_invalid', status: 401, retryable: false, attempts: 1 });
    expect(forged.session).toBeUndefined();

    expect(g.retries).toEqual([]);
    expect(g.sleeps).toEqual([]);
    expect(await g.metric('gateway_http_requests_total', { route: CARDS_ROUTE, status_code: '400' })).toBe(1);
    expect(await g.metric('gateway_http_requests_total', { route: CARDS_ROUTE, status_code: '403' })).toBe(2);
    expect(await g.metric('gateway_http_requests_total', { route: CARDS_ROUTE, status_code: '401' })).toBe(1);
    expect((await g.connectorStats()).cardsCreated).toBe(1);
  });

  it('refuses a plain-HTTP base URL', () => {
    expect(() => new CardGatewayClient({ baseUrl: 'http://127.0.0.1:8080' })).toThrow(/https/);
  });
});
