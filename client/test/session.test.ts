import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, SessionEndedError, type SessionTokens } from '../src/index.js';
import { DEFAULT_CREDENTIALS, testConfig } from '../../test/support/gateway-fixture.js';
import { cardInput, PASSWORD, rejectionOf, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * Sessions against a real gateway over TLS: login, proactive single-flight refresh that keeps
 * the rotated refresh token, refresh limits honoured, and a session whose refresh-token family
 * was revoked reported as ended.
 */

const MINUTE = 60_000;

describe('client sessions against a real gateway', () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  /** Puts the shared clock `seconds` before the current access token's expiry. */
  function secondsBeforeExpiry(gateway: RealGateway, session: SessionTokens, seconds: number): void {
    gateway.gw.clock.set(session.accessTokenExpiresAt * 1000 - seconds * 1000);
  }

  it('50 concurrent calls around an expiring access token make exactly one refresh, and the rotated refresh token is kept', async () => {
    g = await startRealGateway();
    const changes: (SessionTokens | undefined)[] = [];
    const client = g.client({ onSessionChange: (session) => changes.push(session) });
    const first = await client.login('full', PASSWORD);
    expect(changes).toHaveLength(1);

    // 200 s left: inside the default 300 s refresh window, still valid at the gateway.
    secondsBeforeExpiry(g, first, 200);
    const results = await Promise.all(Array.from({ length: 50 }, () => client.createCard(cardInput())));

    expect(new Set(results.map((result) => result.card.cardId)).size).toBe(50);
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(1);
    expect(await g.metric('gateway_refreshes_total', { outcome: 'succeeded' })).toBe(1);
    expect(await g.metric('gateway_refreshes_total')).toBe(1);
    const second = client.session!;
    expect(second.refreshToken).not.toBe(first.refreshToken);
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(second.accessTokenExpiresAt).toBeGreaterThan(first.accessTokenExpiresAt);
    // The ID token is login's; refresh does not replace it.
    expect(second.idToken).toBe(first.idToken);
    expect(changes).toHaveLength(2);
    expect(changes[1]).toEqual(second);

    // A fresh token: 50 more calls refresh nothing.
    await Promise.all(Array.from({ length: 50 }, () => client.createCard(cardInput())));
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(1);

    // Well past the first rotation's 60 s grace, the next refresh succeeds only if the client
    // presents the rotated token: the old one would now be reuse and revoke the session.
    secondsBeforeExpiry(g, second, 100);
    await Promise.all(Array.from({ length: 10 }, () => client.createCard(cardInput())));
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(2);
    expect(g.auditEvents('refresh.reuse_detected')).toHaveLength(0);
    expect(client.session!.refreshToken).not.toBe(second.refreshToken);
    expect(g.retries).toEqual([]);
  });

  it('refreshes at the configured point before expiry', async () => {
    g = await startRealGateway();
    const early = g.client({ refreshBeforeSeconds: 600 });
    const standard = g.client();
    const earlySession = await early.login('full', PASSWORD);
    const standardSession = await standard.login('full', PASSWORD);

    secondsBeforeExpiry(g, earlySession, 500);
    expect(await standard.accessToken()).toBe(standardSession.accessToken);
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(0);
    expect(await early.accessToken()).not.toBe(earlySession.accessToken);
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(1);
  });

  it('a refresh refused with 429 is retried after Retry-After; one that cannot wait keeps the still-valid token', async () => {
    g = await startRealGateway({ overrides: { rateLimits: { login: { points: 100, windowSeconds: 60 }, refresh: { points: 1, windowSeconds: 60 } } } });
    const client = g.client();
    await client.login('full', PASSWORD);
    // The refresh limit (1 here) counts fixed minutes of the gateway clock: go 45 s into one.
    const minute = (ms: number) => Math.floor(ms / MINUTE) * MINUTE;
    g.gw.clock.set(minute(g.gw.clock.now()) + MINUTE + 45_000);

    await client.refresh();
    expect(g.retries).toEqual([]);
    await client.refresh();
    expect(g.retries).toHaveLength(1);
    const retry = g.retries[0]!;
    expect(retry).toMatchObject({ operation: 'refresh', attempt: 1, error: { code: 'rate_limited', status: 429, retryable: true, retryAfter: 15 } });
    expect(retry.delayMs).toBeGreaterThanOrEqual(15_000);
    expect(g.sleeps).toEqual([retry.delayMs]);
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(2);
    expect(g.auditEvents('refresh.rate_limited')).toHaveLength(1);

    // Near expiry, with the minute's one refresh already used by another process of the same
    // credential: Retry-After is 59 s, longer than a refresh may be retried (30 s, inside the
    // old token's 60 s grace). The proactive refresh gives up at once and callers go on with
    // the current token, which has more than 200 s left.
    const current = client.session!;
    g.gw.clock.set(minute(current.accessTokenExpiresAt * 1000 - 200_000) + 1_000);
    const other = g.client();
    await other.login('full', PASSWORD);
    await other.refresh();
    expect(await client.accessToken()).toBe(current.accessToken);
    expect(g.auditEvents('refresh.rate_limited')).toHaveLength(2);
    expect(g.retries).toHaveLength(1);
    // It does not ask again before Retry-After has passed.
    const card = await client.createCard(cardInput());
    expect(card.attempts).toBe(1);
    expect(g.auditEvents('refresh.rate_limited')).toHaveLength(2);
    // In the next minute the refresh goes through.
    g.gw.clock.advance(MINUTE);
    expect(await client.accessToken()).not.toBe(current.accessToken);
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(4);
  });

  it('a wrong password is a final 401: not retried', async () => {
    g = await startRealGateway();
    const client = g.client();
    const error = await rejectionOf(client.login('full', 'not the password'));
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'authentication_failed', status: 401, retryable: false, attempts: 1 });
    expect((error as ApiError).correlationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(g.auditEvents('login.failed')).toHaveLength(1);
    expect(g.retries).toEqual([]);
    expect(client.session).toBeUndefined();
    await expect(client.createCard(cardInput())).rejects.toMatchObject({ name: 'SessionEndedError', reason: 'not_logged_in' });
  });

  it('reports the session as ended after a logout from elsewhere revoked the refresh-token family', async () => {
    g = await startRealGateway();
    const ended: (SessionTokens | undefined)[] = [];
    const client = g.client({ onSessionChange: (session) => ended.push(session) });
    const session = await client.login('full', PASSWORD);
    // Another process holding the same session logs out.
    const elsewhere = g.client({ session });
    await elsewhere.logout();
    expect(elsewhere.session).toBeUndefined();
    expect(g.auditEvents('logout').filter((event) => event.outcome === 'success')).toHaveLength(1);

    // The access token still works until it needs refreshing (spec 3).
    expect((await client.createCard(cardInput())).attempts).toBe(1);
    secondsBeforeExpiry(g, session, 200);
    const before = (await g.connectorStats()).requestsReceived;
    const error = await rejectionOf(client.createCard(cardInput()));

    expect(error).toBeInstanceOf(SessionEndedError);
    const sessionEnded = error as SessionEndedError;
    expect(sessionEnded).toMatchObject({
      reason: 'refresh_rejected',
      gatewayCode: 'refresh_token_revoked',
      code: 'session_ended',
      status: 401,
      retryable: false,
    });
    expect(sessionEnded.message).toMatch(/revoked.*log in again/);
    expect(sessionEnded.correlationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(sessionEnded.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await g.connectorStats()).requestsReceived).toBe(before);
    expect(client.session).toBeUndefined();
    expect(ended.at(-1)).toBeUndefined();
    expect(g.retries).toEqual([]);

    // Every later call says the same without asking the gateway again.
    await expect(client.accessToken()).rejects.toMatchObject({ reason: 'refresh_rejected', gatewayCode: 'refresh_token_revoked' });
    expect(await g.metric('gateway_refreshes_total', { outcome: 'revoked' })).toBe(1);

    // A new login starts over.
    await client.login('full', PASSWORD);
    expect((await client.createCard(cardInput())).card.status).toBe('active');
  });

  it('reports the session as ended after reuse of an old refresh token past its grace revoked the family', async () => {
    g = await startRealGateway();
    const a = g.client();
    const session = await a.login('full', PASSWORD);
    // Two processes wrongly sharing one session: each rotation leaves the other with an old token.
    const b = g.client({ session });
    secondsBeforeExpiry(g, session, 200);
    await a.accessToken();
    expect(g.auditEvents('refresh.succeeded')).toHaveLength(1);

    g.gw.clock.advance(61_000);
    const bError = await rejectionOf(b.accessToken());
    expect(bError).toBeInstanceOf(SessionEndedError);
    expect(bError).toMatchObject({ reason: 'refresh_rejected', gatewayCode: 'refresh_token_revoked', status: 401 });
    expect(g.auditEvents('refresh.reuse_detected')).toHaveLength(1);

    // The gateway revoked the whole family: the process that held the newest token is out too.
    const aError = await rejectionOf(a.refresh());
    expect(aError).toBeInstanceOf(SessionEndedError);
    expect(aError).toMatchObject({ reason: 'refresh_rejected', gatewayCode: 'refresh_token_revoked' });
    expect(a.session).toBeUndefined();
    // Logging out of an ended session does nothing and does not fail.
    await a.logout();
  });

  it('reports a session that ended with its credential (deactivated, then active again) as ended, token_revoked; its logout resolves (D41)', async () => {
    g = await startRealGateway();
    const client = g.client();
    await client.login('full', PASSWORD);
    const other = g.client();
    await other.login('full', PASSWORD);
    const withActive = (active: boolean) => DEFAULT_CREDENTIALS.map((credential) => (credential.id === 'cred-full' ? { ...credential, active } : credential));
    g.gw.clock.advance(MINUTE);
    await g.gw.gateway.reload(await testConfig({}, withActive(false)));
    g.gw.clock.advance(MINUTE);
    await g.gw.gateway.reload(await testConfig({}, withActive(true)));

    const error = await rejectionOf(client.createCard(cardInput()));
    expect(error).toBeInstanceOf(SessionEndedError);
    expect(error).toMatchObject({ reason: 'access_rejected', gatewayCode: 'token_revoked', status: 401, retryable: false });
    expect((error as SessionEndedError).message).toMatch(/credential.*log in again/);
    expect(g.retries).toEqual([]);
    expect((await g.connectorStats()).requestsReceived).toBe(0);
    // The other client's session is over at the gateway too: its logout counts as done.
    await other.logout();
    expect(other.session).toBeUndefined();
    // A new login works at once.
    await client.login('full', PASSWORD);
    expect((await client.createCard(cardInput())).card.status).toBe('active');
  });

  it('an access token that expired before it was refreshed ends the session (the gateway refreshes only with a valid one)', async () => {
    g = await startRealGateway();
    const client = g.client();
    const session = await client.login('full', PASSWORD);
    // Idle past the hour (and the gateway's 5 s clock tolerance).
    g.gw.clock.set(session.accessTokenExpiresAt * 1000 + 10_000);
    const error = await rejectionOf(client.createCard(cardInput()));
    expect(error).toBeInstanceOf(SessionEndedError);
    expect(error).toMatchObject({ reason: 'refresh_rejected', gatewayCode: 'token_expired', status: 401, retryable: false });
    expect((error as SessionEndedError).message).toMatch(/access token expired before it could be refreshed.*log in again/);
    expect((await g.connectorStats()).requestsReceived).toBe(0);
  });

  it('logout revokes the session at the gateway and ends it locally', async () => {
    g = await startRealGateway();
    const client = g.client();
    const session = await client.login('full', PASSWORD);
    await client.logout();
    expect(client.session).toBeUndefined();
    await expect(client.createCard(cardInput())).rejects.toMatchObject({ name: 'SessionEndedError', reason: 'logged_out' });
    // The refresh token is dead at the gateway: a client resuming it cannot refresh.
    const resumed = g.client({ session });
    await expect(resumed.refresh()).rejects.toMatchObject({ reason: 'refresh_rejected', gatewayCode: 'refresh_token_revoked' });
  });
});
