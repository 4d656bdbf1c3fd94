import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { assertNoSecrets, createTestGateway, login, PASSWORD, type TestGateway } from '../support/gateway-fixture.js';

/**
 * Spec 5.9, D18, D21: no log line and no audit line carries an Authorization header value, a
 * password, a token, a PAN or a CVC, whatever path a request takes (success, failure,
 * validation error, refused URL token, 500). Every captured line is scanned.
 */

const WRONG_PASSWORD = 'not-the-password-but-still-secret-42';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Every primitive value in a parsed JSON line, with the key it sits under. */
function leaves(value: unknown, key = ''): [string, unknown][] {
  if (value === null || typeof value !== 'object') return [[key, value]];
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => leaves(v, k));
}

describe('no secrets in logs or audit', () => {
  let gw: TestGateway;
  let connector: RunningSandboxConnector;
  /** Every secret value the session below has seen. */
  const secrets: string[] = [PASSWORD, WRONG_PASSWORD];
  /** Too short for assertNoSecrets: checked value by value instead. */
  let cardCvc = '';

  beforeAll(async () => {
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
    gw = await createTestGateway({
      overrides: { connector: { url: connector.url, timeoutMs: 30_000 } },
      extend: {
        protected: (scope) => {
          scope.get('/api/v1/test/boom', async () => {
            throw new Error('handler failed');
          });
          // A careless handler logging the usual shapes: the logger's redaction is the second line of defence.
          scope.post('/api/v1/test/careless', async (request) => {
            request.log.info({ headers: request.headers, body: request.body }, 'careless: headers and body');
            request.log.info({ req: { headers: request.headers } }, 'careless: nested headers');
            request.log.info(
              { authorization: request.headers.authorization, password: (request.body as { password?: string }).password },
              'careless: top level',
            );
            return { ok: true };
          });
        },
      },
    });

    // Login: success, then a wrong password, then an unknown user with the real password.
    const session = await login(gw);
    secrets.push(session.accessToken, session.refreshToken, session.idToken);
    const bearer = `Bearer ${session.accessToken}`;
    secrets.push(bearer);
    expect((await gw.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'full', password: WRONG_PASSWORD } })).statusCode).toBe(401);
    expect((await gw.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'nobody', password: PASSWORD } })).statusCode).toBe(401);

    // Validation errors whose bodies carry the password.
    expect((await gw.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'full', password: PASSWORD, otp: PASSWORD } })).statusCode).toBe(
      400,
    );
    expect(
      (
        await gw.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          headers: { 'content-type': 'application/json' },
          payload: `{"username":"full","password":"${PASSWORD}"`,
        })
      ).statusCode,
    ).toBe(400);
    expect((await gw.inject({ method: 'POST', url: '/api/v1/auth/login', headers: { 'content-type': 'text/plain' }, payload: PASSWORD })).statusCode).toBe(415);

    // Refresh, and a refresh with a body that fails validation.
    const refreshed = await gw.inject({
      method: 'POST',
      url: '/api/v1/auth/refresh',
      headers: { authorization: bearer },
      payload: { refreshToken: session.refreshToken },
    });
    expect(refreshed.statusCode).toBe(200);
    const rotated = refreshed.json<{ accessToken: string; refreshToken: string }>();
    secrets.push(rotated.accessToken, rotated.refreshToken, `Bearer ${rotated.accessToken}`);
    expect(
      (
        await gw.inject({
          method: 'POST',
          url: '/api/v1/auth/refresh',
          headers: { authorization: bearer },
          payload: { refreshToken: session.refreshToken, password: PASSWORD },
        })
      ).statusCode,
    ).toBe(400);

    // Wrong uses of tokens: the ID token as a bearer, a token in the URL.
    expect(
      (
        await gw.inject({
          method: 'POST',
          url: '/api/v1/auth/logout',
          headers: { authorization: `Bearer ${session.idToken}` },
          payload: { refreshToken: rotated.refreshToken },
        })
      ).statusCode,
    ).toBe(401);
    const inUrl = await gw.inject({ method: 'GET', url: `/.well-known/jwks.json?access_token=${session.accessToken}` });
    expect(inUrl.statusCode).toBe(401);
    expect(inUrl.json<{ message: string }>().message).toBe('Tokens are not accepted in the URL');
    expect(
      (
        await gw.inject({
          method: 'POST',
          url: `/api/v1/auth/refresh?refresh_token=${rotated.refreshToken}`,
          headers: { authorization: bearer },
          payload: { refreshToken: rotated.refreshToken },
        })
      ).statusCode,
    ).toBe(401);

    // A card with full details: the PAN and CVC reach the client and nothing else.
    const card = await gw.inject({
      method: 'POST',
      url: '/api/v1/issuing/cards?revealDetails=true',
      headers: { authorization: bearer },
      payload: { requestId: randomUUID(), cardLimit: 5000, currency: 'EUR' },
    });
    expect(card.statusCode).toBe(201);
    const { pan, cvc } = card.json<{ pan: string; cvc: string }>();
    expect(pan).toMatch(/^\d{16}$/);
    expect(cvc).toMatch(/^\d{3,4}$/);
    secrets.push(pan, pan.slice(0, 12), pan.slice(4));
    cardCvc = cvc;

    // A 500 on a protected route, and a handler that logs headers and bodies.
    expect((await gw.inject({ method: 'GET', url: '/api/v1/test/boom', headers: { authorization: bearer } })).statusCode).toBe(500);
    expect(
      (
        await gw.inject({
          method: 'POST',
          url: '/api/v1/test/careless',
          headers: { authorization: bearer },
          payload: { password: PASSWORD, refreshToken: rotated.refreshToken, card: { pan, cvc } },
        })
      ).statusCode,
    ).toBe(200);

    // Logout, and logout again (401).
    expect(
      (await gw.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: { authorization: bearer }, payload: { refreshToken: rotated.refreshToken } }))
        .statusCode,
    ).toBe(200);
    expect(
      (await gw.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: { authorization: bearer }, payload: { refreshToken: rotated.refreshToken } }))
        .statusCode,
    ).toBe(401);
  });

  afterAll(async () => {
    await gw.close();
    await connector.close();
  });

  it('captured what the scan is meant to cover', () => {
    const log = gw.logs.text();
    expect(log).toContain('"msg":"request failed"');
    expect(log).toContain('careless: headers and body');
    expect(log).toContain('"body":{"password":"[redacted]","refreshToken":"[redacted]","card":{"pan":"[redacted]","cvc":"[redacted]"}}');
    const events = new Set(gw.audit.events().map((event) => event.event));
    for (const event of ['login.succeeded', 'login.failed', 'refresh.succeeded', 'logout', 'card.created', 'card.revealed']) expect(events).toContain(event);
  });

  it('no log line contains a password, token, Authorization value, PAN or CVC', () => {
    expect(gw.logs.lines.length).toBeGreaterThan(10);
    assertNoSecrets(gw.logs.text(), secrets);
    for (const line of gw.logs.lines) {
      expect(line).not.toMatch(/eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\./);
      expect(line.toLowerCase()).not.toContain('bearer ');
      expect(line).not.toContain('access_token=');
    }
  });

  it('no log or audit value is the CVC, and no pan/cvc field holds a value', () => {
    expect(cardCvc).toMatch(/^\d{3,4}$/);
    for (const line of [...gw.logs.lines, ...gw.audit.lines]) {
      for (const [key, value] of leaves(JSON.parse(line))) {
        expect(value, `${key} in ${line}`).not.toBe(cardCvc);
        if (/^(pan|cvc)$/i.test(key)) expect(value).toBe('[redacted]');
      }
    }
  });

  it('the 500 log line has the error but not the request credentials', () => {
    const failure = gw.logs.lines.find((line) => line.includes('"msg":"request failed"'));
    expect(failure).toBeDefined();
    expect(failure).toContain('handler failed');
    assertNoSecrets(failure ?? '', secrets);
  });

  it('no audit line contains a password, token, Authorization value, PAN or CVC', () => {
    expect(gw.audit.lines.length).toBeGreaterThan(5);
    assertNoSecrets(gw.audit.lines.join('\n'), secrets);
  });

  it('every audit line is one JSON object with time, event, correlationId, clientAddress and outcome', () => {
    for (const line of gw.audit.lines) {
      expect(line.endsWith('\n')).toBe(true);
      expect(line.trimEnd()).not.toContain('\n');
      const event = JSON.parse(line) as Record<string, unknown>;
      expect(new Date(String(event['time'])).toISOString()).toBe(event['time']);
      expect(event['event']).toMatch(/^[a-z]+\.[a-z_]+$|^logout$/);
      expect(event['correlationId']).toMatch(UUID);
      expect(event['clientAddress']).toBe('127.0.0.1');
      expect(['success', 'failure', 'denied']).toContain(event['outcome']);
    }
  });
});
