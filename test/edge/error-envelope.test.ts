import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestGateway, PASSWORD, type TestGateway } from '../support/gateway-fixture.js';

/** D20: every error the gateway emits is the envelope, and every response has X-Correlation-Id. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const LOGIN = '/api/v1/auth/login';

interface Envelope {
  correlationId: string;
  status: number;
  message: string;
  details: { fields?: { path: string; message: string }[] };
  timestamp: string;
}

/** Asserts the D20 envelope shape and returns it; status and message must match exactly. */
function expectEnvelope(response: LightMyRequestResponse, status: number, message: string): Envelope {
  expect(response.statusCode).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  const body = response.json<Envelope>();
  expect(Object.keys(body).sort()).toEqual(['code', 'correlationId', 'details', 'message', 'status', 'timestamp']);
  expect(body.correlationId).toMatch(UUID);
  expect(response.headers['x-correlation-id']).toBe(body.correlationId);
  expect(body.status).toBe(status);
  expect(body.message).toBe(message);
  expect(typeof body.details).toBe('object');
  expect(body.details).not.toBeNull();
  expect(Array.isArray(body.details)).toBe(false);
  expect(body.timestamp).toMatch(ISO_UTC);
  expect(new Date(body.timestamp).toISOString()).toBe(body.timestamp);
  return body;
}

const json = (payload: string) => ({ method: 'POST' as const, url: LOGIN, headers: { 'content-type': 'application/json' }, payload });

describe('error envelope (D20)', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await createTestGateway({
      extend: {
        public: (app) =>
          app.get('/boom', async () => {
            throw new Error('secret internal detail /etc/x');
          }),
      },
    });
  });
  afterAll(async () => {
    await gw.close();
  });

  it('404 for an unknown path', async () => {
    const body = expectEnvelope(await gw.inject({ method: 'GET', url: '/api/v1/nothing-here' }), 404, 'Resource not found');
    expect(body.details).toEqual({});
  });

  it('405 with Allow for a known path called with another method', async () => {
    const response = await gw.inject({ method: 'GET', url: LOGIN });
    expectEnvelope(response, 405, 'Method not allowed');
    expect(response.headers['allow']).toBe('POST');
  });

  it('405 keeps the Allow header when the URL has a query string', async () => {
    const response = await gw.inject({ method: 'DELETE', url: `${LOGIN}?x=1` });
    expectEnvelope(response, 405, 'Method not allowed');
    expect(response.headers['allow']).toBe('POST');
  });

  it('415 for a text/plain body', async () => {
    const response = await gw.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'text/plain' }, payload: `username=full&password=${PASSWORD}` });
    expectEnvelope(response, 415, 'Content-Type must be application/json');
  });

  it('415 for another non-JSON media type', async () => {
    const response = await gw.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'application/xml' }, payload: '<login/>' });
    expectEnvelope(response, 415, 'Content-Type must be application/json');
  });

  it('413 for a body over the 16 KiB limit', async () => {
    const payload = JSON.stringify({ username: 'full', password: 'x'.repeat(16 * 1024) });
    expect(Buffer.byteLength(payload)).toBeGreaterThan(gw.config.cards.bodyLimitBytes);
    expectEnvelope(await gw.inject(json(payload)), 413, 'Request body is too large');
  });

  it('400 for malformed JSON', async () => {
    const body = expectEnvelope(await gw.inject(json('{"username": "full", ')), 400, 'Request body is not valid JSON');
    expect(body.details).toEqual({});
  });

  it('400 for an empty JSON body', async () => {
    expectEnvelope(await gw.inject(json('')), 400, 'Request body is empty');
  });

  it('400 for a __proto__ key in the body, naming it', async () => {
    const body = expectEnvelope(
      await gw.inject(json(`{"username":"full","password":"${PASSWORD}","__proto__":{"admin":true}}`)),
      400,
      'Request validation failed',
    );
    expect(body['details']).toEqual({ fields: [{ path: '__proto__', message: 'is not an allowed member name' }] });
  });

  it('400 for a constructor.prototype key in the body (an unknown member)', async () => {
    expectEnvelope(
      await gw.inject(json(`{"username":"full","password":"${PASSWORD}","constructor":{"prototype":{"admin":true}}}`)),
      400,
      'Request validation failed',
    );
  });

  it('400 with details.fields for a missing field', async () => {
    const body = expectEnvelope(await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 'full' } }), 400, 'Request validation failed');
    expect(body.details).toEqual({ fields: [{ path: 'password', message: 'is required' }] });
  });

  it('400 with details.fields for an unknown field', async () => {
    const body = expectEnvelope(
      await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 'full', password: PASSWORD, role: 'admin' } }),
      400,
      'Request validation failed',
    );
    expect(body.details).toEqual({ fields: [{ path: 'role', message: 'is not a known field' }] });
  });

  it('400 with details.fields for a wrong type, never coerced', async () => {
    const body = expectEnvelope(
      await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 12345, password: PASSWORD } }),
      400,
      'Request validation failed',
    );
    expect(body.details).toEqual({ fields: [{ path: 'username', message: 'must be string' }] });
  });

  it('400 lists every problem at once', async () => {
    const body = expectEnvelope(await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 1, extra: true } }), 400, 'Request validation failed');
    expect(body.details.fields).toHaveLength(3);
    expect(body.details.fields).toEqual(
      expect.arrayContaining([
        { path: 'password', message: 'is required' },
        { path: 'extra', message: 'is not a known field' },
        { path: 'username', message: 'must be string' },
      ]),
    );
  });

  it('401 with empty details for wrong credentials', async () => {
    const body = expectEnvelope(
      await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 'full', password: 'wrong password' } }),
      401,
      'Authentication failed',
    );
    expect(body.details).toEqual({});
  });

  it('401 with empty details for a protected route without a token', async () => {
    const body = expectEnvelope(
      await gw.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: 'x' } }),
      401,
      'Authorization header is missing',
    );
    expect(body.details).toEqual({});
  });

  it('500 hides the internal message and stack, and logs them under the correlation id', async () => {
    const response = await gw.inject({ method: 'GET', url: '/boom' });
    const body = expectEnvelope(response, 500, 'Internal error');
    expect(body.details).toEqual({});
    expect(response.body).not.toContain('secret internal detail');
    expect(response.body).not.toContain('/etc/x');
    expect(response.body).not.toMatch(/\bat .+:\d+:\d+/);
    expect(response.body).not.toContain('stack');
    const logged = gw.logs.lines.map((line) => JSON.parse(line) as { correlationId?: string; msg?: string; err?: { message?: string } });
    const failure = logged.find((line) => line.correlationId === body.correlationId && line.msg === 'request failed');
    expect(failure?.err?.message).toBe('secret internal detail /etc/x');
  });

  it('200 responses carry a UUID X-Correlation-Id too, fresh per request', async () => {
    const first = await gw.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    const second = await gw.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-correlation-id']).toMatch(UUID);
    expect(second.headers['x-correlation-id']).toMatch(UUID);
    expect(second.headers['x-correlation-id']).not.toBe(first.headers['x-correlation-id']);
  });

  it('a client-sent X-Correlation-Id or X-Request-Id is never taken as ours', async () => {
    const chosen = '11111111-2222-3333-4444-555555555555';
    const response = await gw.inject({ method: 'GET', url: '/nothing', headers: { 'x-correlation-id': chosen, 'x-request-id': chosen } });
    const body = expectEnvelope(response, 404, 'Resource not found');
    expect(body.correlationId).not.toBe(chosen);
  });
});
